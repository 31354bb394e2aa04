"""A poor man's sampling profiler for engine starts (diagnostics only, never on in a measured run).

Put this folder first on PYTHONPATH and set SPECHARNESS_STACKS to a folder: every Python process started so (the
API server, the engine core it forks or spawns, their helpers) writes each thread's stack with a wall-clock time into
``<folder>/stacks-<pid>.txt`` every SPECHARNESS_STACKS_EVERY_S seconds (default 0.5). Counting which frames recur
attributes the seconds a start spends where its log is silent.
"""

import os
import sys
import threading
import time

_DIR = os.environ.get("SPECHARNESS_STACKS", "")


def _sample(path: str, every: float) -> None:
    me = threading.get_ident()
    with open(path, "a", buffering=1) as out:
        out.write(f"# pid {os.getpid()} argv {' '.join(sys.argv)[:300]}\n")
        while True:
            time.sleep(every)
            stamp = time.strftime("%H:%M:%S", time.localtime()) + f".{int(time.time() * 1000) % 1000:03d}"
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                stack = []
                while frame is not None and len(stack) < 60:
                    code = frame.f_code
                    stack.append(f"{code.co_filename.rsplit('site-packages/', 1)[-1]}:{frame.f_lineno}:{code.co_name}")
                    frame = frame.f_back
                out.write(f"{stamp} {ident} " + " < ".join(stack) + "\n")


def _arm() -> None:
    os.makedirs(_DIR, exist_ok=True)
    every = float(os.environ.get("SPECHARNESS_STACKS_EVERY_S", "0.5"))
    path = os.path.join(_DIR, f"stacks-{os.getpid()}.txt")
    threading.Thread(target=_sample, args=(path, every), daemon=True, name="stack-sampler").start()


if _DIR:
    _arm()
    os.register_at_fork(after_in_child=_arm)
