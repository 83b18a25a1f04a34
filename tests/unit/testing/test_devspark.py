"""The private Spark cluster's bookkeeping: tasks counted per worker from its own work
directory; stop() ends only the processes it started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sparkcdc_dev.devspark import DevSpark


def test_tasks_are_counted_per_worker_for_one_application(tmp_path: Path) -> None:
    cluster = DevSpark(tmp_path)
    logs = {
        ("worker-1", "app-1", "0"): "INFO Executor: Running task 0.0 in stage 0.0 (TID 0)\n" * 3,
        ("worker-1", "app-2", "0"): "INFO Executor: Running task 0.0 in stage 0.0 (TID 0)\n",
        ("worker-2", "app-1", "1"): '{"msg":"Running task 1.0 in stage 2.0 (TID 4)"}\nother\n',
    }
    for (worker, app, executor), text in logs.items():
        folder = cluster.base_dir / worker / "work" / app / executor
        folder.mkdir(parents=True)
        (folder / "stderr").write_text(text)
    assert cluster.executor_tasks("app-1") == {"worker-1": 3, "worker-2": 1}
    assert cluster.executor_tasks("app-3") == {"worker-1": 0, "worker-2": 0}


def test_stop_leaves_a_process_that_is_not_a_spark_daemon_alone(tmp_path: Path) -> None:
    cluster = DevSpark(tmp_path)
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        cluster.base_dir.mkdir(parents=True)
        state = {"port": 1, "ui_port": 2, "pids": {"master": other.pid}}
        cluster.state_file.write_text(json.dumps(state))
        cluster.stop(timeout_s=5)
        assert other.poll() is None  # a reused process id: not ours to end
        assert not cluster.state_file.exists()
        assert not cluster.is_running()
    finally:
        other.communicate(b"")
