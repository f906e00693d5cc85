"""``nntile-lab train`` in a child process, optionally stalled inside a checkpoint
write so that a test can kill it there: ``train_child.py STALL_AT_SAVE -- ARGS``.
With STALL_AT_SAVE = k > 0, the k-th checkpoint's model.npz is written, then the
child prints STALLED and sleeps (the test sends kill -9 then)."""
import sys
import time

from nntile_lab import cli
from nntile_lab.train import checkpoint


def main():
    stall_at = int(sys.argv[1])
    argv = sys.argv[sys.argv.index("--") + 1:]
    real, saves = checkpoint._write_npz, []

    def write_npz(path, arrays):
        real(path, arrays)
        if path.name == "model.npz":
            saves.append(path)
            if len(saves) == stall_at:
                print("STALLED", flush=True)
                time.sleep(60)

    checkpoint._write_npz = write_npz
    sys.exit(cli.main(argv))


if __name__ == "__main__":
    main()
