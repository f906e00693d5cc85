"""``nntile-lab sample``: text from a run's checkpoint and from a Hugging Face .safetensors
file (greedy: the tokens Hugging Face generates), JSON Lines, every bad input one line and
exit 2, Ctrl-C within a second with the text so far and exit 130."""
import json
import signal
import time

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import nntile_lab as nl
from nntile_lab import cli
from nntile_lab.data.tokenizer import get_encoding
from nntile_lab.nn.config import GPT2Config
from nntile_lab.reference import hf_generate as hf
from nntile_lab.sample.text import encode
from nntile_lab.train.checkpoint import config_dict, save_checkpoint
from tests.faults._proc import read_until, spawn
from tests.generate.test_models import wide_state

CFG = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=50257,
                 vocab_tile=8192)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory with a checkpoint of CFG's model and wide random weights."""
    out = tmp_path_factory.mktemp("run")
    state = wide_state(CFG, 9)
    save_checkpoint(out, state, {}, {"step": 0, "config": config_dict(CFG)})
    return out, state


def test_sample_prints_the_greedy_text_of_a_run(run_dir, capsys):
    out, state = run_dir
    assert cli.main(["sample", "--from", str(out), "--prompt", "Hello", "--greedy",
                     "--max-new-tokens", "8"]) == 0
    got = capsys.readouterr()
    want = hf.generate(hf.gpt2_model(CFG, state), [encode("Hello")], 8)[0]
    assert got.out == "Hello" + get_encoding().decode(want) + "\n"
    assert "prefill 1 tokens" in got.err and "decode 7 tokens" in got.err
    assert "tokens/s" in got.err


def test_json_lines_stream_then_the_result(run_dir, capsys):
    out, state = run_dir
    assert cli.main(["sample", "--from", str(out), "--prompt", "Hello world", "--greedy",
                     "--max-new-tokens", "6", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    pieces, result = lines[:-1], lines[-1]
    sample = result["samples"][0]
    assert "".join(p["text"] for p in pieces) == sample["text"]
    assert sample["tokens"] == hf.generate(hf.gpt2_model(CFG, state),
                                           [encode("Hello world")], 6)[0]
    assert sample["finish"] == "length" and result["interrupted"] is False
    assert sample["decode_tokens_per_s"] > 0 and sample["prefill_tokens_per_s"] > 0


def test_seeded_samples_repeat_and_differ_from_each_other(run_dir, capsys):
    out, _ = run_dir
    argv = ["sample", "--from", str(out), "--num-samples", "2", "--seed", "4", "--top-k",
            "40", "--max-new-tokens", "10", "--json"]
    assert cli.main(argv) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[-1])["samples"]
    assert cli.main(argv) == 0
    again = json.loads(capsys.readouterr().out.splitlines()[-1])["samples"]
    assert [s["tokens"] for s in first] == [s["tokens"] for s in again]
    assert first[0]["tokens"] != first[1]["tokens"]


def test_a_hugging_face_safetensors_file(tmp_path, capsys):
    """GPT2Model's own names (no ``transformer.`` prefix) and its mask buffers, as the Hub's
    files hold them; n_head from config.json beside it."""
    cfg = GPT2Config(n_layer=1, n_head=4, n_embd=32, n_positions=32, vocab_size=50257)
    state = wide_state(cfg, 11)
    tensors = {k.removeprefix("transformer."): torch.from_numpy(v) for k, v in state.items()}
    tensors["h.0.attn.bias"] = torch.ones(1, 1, 32, 32)
    save_file(tensors, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({"n_head": 4}))
    assert cli.main(["sample", "--from", str(tmp_path / "model.safetensors"), "--prompt",
                     "The", "--greedy", "--max-new-tokens", "5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert got["config"]["n_head"] == 4
    assert got["samples"][0]["tokens"] == hf.generate(hf.gpt2_model(cfg, state),
                                                      [encode("The")], 5)[0]


@pytest.mark.parametrize("argv,message", [
    (["--temperature", "0"], "argument --temperature: 0 is out of range: give a number in "
                             "(0, inf)"),
    (["--temperature", "-1"], "argument --temperature: -1 is out of range"),
    (["--temperature", "nan"], "argument --temperature: nan is out of range"),
    (["--top-k", "0"], "argument --top-k: 0 is out of range"),
    (["--top-p", "0"], "argument --top-p: 0 is out of range: give a number in (0, 1]"),
    (["--top-p", "1.5"], "argument --top-p: 1.5 is out of range: give a number in (0, 1]"),
    (["--max-new-tokens", "0"], "argument --max-new-tokens: 0 is out of range"),
    (["--max-new-tokens", "64"], "--max-new-tokens 64: max_new_tokens=64 after a prompt of 2 "
                                 "tokens needs 65 positions, past the cache of n_positions=64: "
                                 "at most 63 new tokens"),
    (["--prompt", " x" * 70], "prompt 0 has 70 tokens, more than the model's n_positions=64"),
    (["--seed", "-2"], "argument --seed: -2 is out of range"),
    (["--from", "/nonexistent/run"], "--from /nonexistent/run: no such file or directory"),
])
def test_bad_input_is_one_line_and_exit_2(run_dir, capsys, argv, message):
    out, _ = run_dir
    base = ["sample", "--from", str(out), "--prompt", "Hi there"]
    assert cli.main(base + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nntile-lab sample: error: "), err
    assert "usage:" not in err[0]
    assert message in err[0]


def test_a_checkpoint_of_another_shape_and_ids_past_its_vocabulary(tmp_path, capsys):
    small = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=16, vocab_size=100)
    # the config says n_embd 16, the arrays are 32 wide
    wide = GPT2Config(n_layer=1, n_head=2, n_embd=32, n_positions=16, vocab_size=100)
    save_checkpoint(tmp_path / "a", wide_state(wide, 1), {}, {"config": config_dict(small)})
    assert cli.main(["sample", "--from", str(tmp_path / "a"), "--prompt", "x",
                     "--max-new-tokens", "4"]) == 2
    err = capsys.readouterr().err
    assert "has shape (100, 32) but this GPT2Config needs (100, 16)" in err
    save_checkpoint(tmp_path / "b", wide_state(small, 1), {}, {"config": config_dict(small)})
    assert cli.main(["sample", "--from", str(tmp_path / "b"), "--prompt", "Hello",
                     "--max-new-tokens", "4"]) == 2
    err = capsys.readouterr().err
    assert "id 15496 is not a token of this model: ids must be in [0, 100)" in err


def test_ctrl_c_stops_within_a_second_keeping_the_text(tmp_path):
    # a cache of 1024 positions: on a quiet machine CFG's 62 tokens could all be out before
    # the Ctrl-C arrived (exit 0); 1000 tokens take seconds, the interrupt comes after 50 ms
    long = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=1024, vocab_size=50257,
                      vocab_tile=8192)
    save_checkpoint(tmp_path, wide_state(long, 9), {}, {"step": 0, "config": config_dict(long)})
    proc = spawn("-m", "nntile_lab.cli", "sample", "--from", str(tmp_path), "--prompt", "Go",
                 "--max-new-tokens", "1000", "--json", "--ncpu", "1")
    try:
        _, lines = read_until(proc, lambda line: '"text"' in line, timeout=180)
        time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, rest = read_until(proc, lambda line: '"samples"' in line, timeout=30)
        stopped = time.monotonic() - t0          # the text so far is out: generation over
        code = proc.wait(timeout=30)
        exited = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 130
    assert stopped < 1.0, f"{stopped:.2f} s from Ctrl-C to the result"
    assert exited < 5.0, f"{exited:.2f} s from Ctrl-C to exit (StarPU's shutdown included)"
    result = json.loads(rest[-1])
    assert result["interrupted"] is True
    sample = result["samples"][0]
    assert sample["finish"] == "interrupted" and 0 < len(sample["tokens"]) < 1000
    pieces = [json.loads(x)["text"] for x in lines + rest[:-1]]
    assert "".join(pieces) == sample["text"]
    assert np.all(np.array(sample["tokens"]) < CFG.vocab_size)


def test_the_default_length_fits_the_cache(tmp_path, capsys):
    small = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=16, vocab_size=50257)
    save_checkpoint(tmp_path, wide_state(small, 2), {}, {"config": config_dict(small)})
    assert cli.main(["sample", "--from", str(tmp_path), "--prompt", "a b c", "--json"]) == 0
    got = json.loads(capsys.readouterr().out.splitlines()[-1])["samples"][0]
    assert len(got["tokens"]) == 14                  # 16 positions − 3 prompt tokens + 1


def test_the_python_api_and_the_cli_agree(run_dir, capsys):
    """The command's greedy tokens are model.generate's in a runtime of one's own."""
    out, state = run_dir
    assert cli.main(["sample", "--from", str(out), "--prompt", "abc", "--greedy",
                     "--max-new-tokens", "4", "--json"]) == 0
    got = json.loads(capsys.readouterr().out.splitlines()[-1])["samples"][0]["tokens"]
    with nl.Runtime(ncpu=1):
        model = nl.GPT2(CFG)
        model.load_state_dict(state)
        want = model.generate([encode("abc")], 4, greedy=True).tokens[0]
        model.free()
    assert got == want
