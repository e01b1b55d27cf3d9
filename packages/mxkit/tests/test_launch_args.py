"""``mxkit launch``: requests that cannot run fail before anything starts, with a clear message."""

from __future__ import annotations

import sys

import pytest
from mxkit.core.errors import ConfigError, MissingComponentError
from mxkit.mx.cli import main
from mxkit.mx.cli_launch import parse_env
from mxkit.mx.launch import LaunchSpec, launch, worker_environments


@pytest.mark.parametrize(("argv", "message"), [
    (["launch", "-n", "2"], "needs the worker command after '--'"),
    (["launch", "-n", "0", "--", "true"], "-n/--num-workers must be a positive integer, got 0"),
    (["launch", "-n", "2", "-s", "-1", "--", "true"], "-s/--num-servers must be a positive integer, got -1"),
    (["launch", "-n", "2", "--env", "NOEQUALS", "--", "true"], "--env 'NOEQUALS': write NAME=VALUE"),
    (["launch", "-n", "2", "--env", "BAD-NAME=1", "--", "true"], "--env 'BAD-NAME=1'"),
])
def test_a_malformed_request_is_refused_before_ray_starts(argv, message, capsys, monkeypatch):
    def no_ray():  # nothing may start for a request that cannot run
        raise AssertionError("the launcher reached the distributed store")

    monkeypatch.setattr("mxkit.mx.launch._dist_modules", no_ray)
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_placement_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["launch", "-n", "1", "--placement", "everywhere", "--", "true"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'everywhere'" in capsys.readouterr().err


def test_launch_spec_checks_its_own_fields():
    with pytest.raises(ConfigError, match="--placement 'moon': choose one of local, spread"):
        LaunchSpec(command=["true"], num_workers=1, num_servers=1, placement="moon").check()
    with pytest.raises(ConfigError, match="must be a positive integer, got True"):
        LaunchSpec(command=["true"], num_workers=True, num_servers=1).check()


def test_without_the_distributed_store_the_message_says_what_to_install(monkeypatch):
    # None in sys.modules makes the import fail as if mxkit-kvstore's dist extra were not installed
    monkeypatch.setitem(sys.modules, "mxkit.kvstore.dist", None)
    with pytest.raises(MissingComponentError, match=r"pip install 'mxkit-kvstore\[dist\]'"):
        launch(LaunchSpec(command=["true"], num_workers=1, num_servers=1))


def test_env_items_parse_and_values_may_contain_equals_signs():
    assert parse_env(["A=1", "B_2=x=y", "EMPTY="]) == {"A": "1", "B_2": "x=y", "EMPTY": ""}


def test_each_worker_gets_its_rank_over_the_cluster_and_job_variables():
    envs = worker_environments({"PATH": "/bin", "MXKIT_RANK": "stale"}, {"MXKIT_RAY_ADDRESS": "127.0.0.1:1"},
                               {"MXKIT_JOB_NAMESPACE": "j"}, 3)
    assert [env["MXKIT_RANK"] for env in envs] == ["0", "1", "2"]
    assert all(env["MXKIT_NUM_WORKERS"] == "3" and env["PATH"] == "/bin" and env["MXKIT_JOB_NAMESPACE"] == "j"
               and env["MXKIT_RAY_ADDRESS"] == "127.0.0.1:1" for env in envs)


def test_workers_on_one_machine_share_its_cores_unless_told_otherwise():
    envs = worker_environments({"OMP_NUM_THREADS": "3"}, {}, {}, 2, cores=8)
    assert all(env["OPENBLAS_NUM_THREADS"] == "4" and env["MXKIT_CPU_KERNEL_THREADS"] == "4" for env in envs)
    assert all(env["OMP_NUM_THREADS"] == "3" for env in envs)  # the user's own setting wins
    assert worker_environments({}, {}, {}, 4, cores=2)[0]["MKL_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in worker_environments({}, {}, {}, 2)[0]  # spread over nodes: left alone


def test_python_workers_write_unbuffered_unless_told_otherwise():
    assert all(env["PYTHONUNBUFFERED"] == "1" for env in worker_environments({}, {}, {}, 2))
    assert worker_environments({"PYTHONUNBUFFERED": ""}, {}, {}, 1)[0]["PYTHONUNBUFFERED"] == ""
