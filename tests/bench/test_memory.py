"""``bench memory --device``: the paper's setting in miniature as rows — the same model on
the CPU workers, on an uncapped OpenCL device and on one capped below the model, RAM as its
overflow (each point in a fresh process)."""
from nntile_lab import cli
from nntile_lab.bench import memory

MIB = 1 << 20
SMALL = dict(vocab_size=8192, vocab_tile=2048, n_layer=2, seq_len=64, batch=4, batch_tile=4,
             warmup_steps=1, measure_steps=1)


def test_device_rows_show_the_capped_device_spilling_to_ram():
    res = memory.run_device(16, (4,), widths=(128, 256), progress=lambda m: None,
                            **SMALL)
    rows = {r["setting"]: r for r in res["rows"]}
    assert set(rows) == {s for s, _ in memory.DEVICE_SETTINGS}
    for r in rows.values():
        assert "error" not in r, r
        assert r["n_embd"] == 256 and r["multiple"] == 4   # 77 MiB planned: nearest 64
    cpu, free, capped = rows["cpu"], rows["device"], rows["device_capped"]
    assert "buses" not in cpu and "device_peak_bytes" not in cpu
    assert capped["device_cap_mb"] == 16 and free["device_cap_mb"] is None
    assert capped["device_peak_bytes"] <= 16 * MIB < free["device_peak_bytes"]
    # under the cap the tiles go back and forth: more traffic each way than uncapped
    for way in ("ram_to_device_per_step", "device_to_ram_per_step"):
        assert capped[way] > 1.5 * free[way] and capped[way] > 16 * MIB
    assert capped["ram_to_device_transfers_per_step"] > 0
    assert {(b["src"], b["dst"]) for b in capped["buses"]} == {("NUMA 0", "OpenCL 0"),
                                                               ("OpenCL 0", "NUMA 0")}
    text = memory.report_device(res)
    assert "device capped → RAM" in text and "device cap 16 MiB" in text


def test_cli_device_options_are_checked():
    for bad in (["--device-cap-mb", "8"], ["--multiples", "0"]):
        try:
            rc = cli.main(["bench", "memory", "--device", *bad, "--json"])
        except SystemExit as exc:
            rc = exc.code
        assert rc == 2, bad
