"""What package cpi leaves out of its virtualenv (cpi/release/lean.py): on small fake trees,
and on a copy of the botocore this checkout runs, that every AWS service the code makes a
client for and every operation it calls are still there afterwards."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from cpi.release import lean
from tests.release.support import REPO, write

LEAN = REPO / "cpi/release/lean.py"
CODE = sorted(p for p in (REPO / "cpi").rglob("*.py") if "release" not in p.relative_to(REPO / "cpi").parts)
AWS_CODE = sorted((REPO / "cpi/clouds/aws").glob("*.py"))
CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+$")


def fake_site_packages(root: Path) -> Path:
    """A venv's site-packages at root/venv/lib/python3.11/site-packages."""
    site = root / "venv/lib/python3.11/site-packages"
    for name in (
        "botocore/__init__.py",
        "botocore/data/endpoints.json",
        "botocore/data/_retry.json",
        "botocore/data/ec2/2015-10-01/service-2.json.gz",
        "botocore/data/ec2/2016-11-15/service-2.json.gz",
        "botocore/data/ec2/2016-11-15/endpoint-rule-set-1.json.gz",
        "botocore/data/ec2/2016-11-15/paginators-1.json",
        "botocore/data/ec2/2016-11-15/waiters-2.json",
        "botocore/data/ec2/2016-11-15/examples-1.json",
        "botocore/data/sts/2011-06-15/service-2.json.gz",
        "botocore/data/s3/2006-03-01/service-2.json.gz",
        "botocore/data/sagemaker/2017-07-24/service-2.json.gz",
        "openstack/__init__.py",
        "openstack/compute/v2/server.py",
        "openstack/tests/unit/test_connection.py",
        "openstack/tests/__pycache__/__init__.cpython-311.pyc",
        "keystoneauth1/tests/unit/test_session.py",
        "pbr/tests/test_version.py",
        "pkg/sub/test/data.txt",
        "pkg/testing.py",
        "pkg/contest/__init__.py",
        "tests/__init__.py",  # a top-level module some wheel installs: not a package's own
        "thing-1.0.dist-info/tests/RECORD",
        "thing-1.0.dist-info/METADATA",
        "rich/__init__.py",
        "rich-15.0.0.dist-info/RECORD",
        "pygments/__init__.py",
        "pygments/lexers/python.py",
        "pygments/lexers/__pycache__/python.cpython-311.pyc",
        "pygments-2.21.0.dist-info/METADATA",
        "setuptools/__init__.py",
        "pkg_resources/__init__.py",
        "_distutils_hack/__init__.py",
        "distutils-precedence.pth",
        "setuptools-84.2.1.dist-info/METADATA",
        "markdown_it_py-4.3.0.dist-info/METADATA",
        "markdown_it/__init__.py",
    ):
        write(site / name, "x")
    write(root / "venv/bin/pygmentize", "x")
    write(root / "venv/bin/rich-thing", "x")
    write(root / "outside.txt", "x")
    write(site / "pygments-2.21.0.dist-info/RECORD", "".join(f"{row},sha256=x,1\n" for row in (
        "../../../bin/pygmentize", "pygments/__init__.py", "pygments/lexers/python.py",
        "pygments-2.21.0.dist-info/METADATA", "../../../../outside.txt")) + "pygments-2.21.0.dist-info/RECORD,,\n")
    write(site / "setuptools-84.2.1.dist-info/RECORD", "".join(f"{row},,\n" for row in (
        "distutils-precedence.pth", "_distutils_hack/__init__.py", "setuptools/__init__.py",
        "pkg_resources/__init__.py")))
    write(site / "markdown_it_py-4.3.0.dist-info/RECORD", "markdown_it/__init__.py,,\n")
    return site


def files(site: Path) -> set[str]:
    return {str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()}


def test_strip_keeps_the_services_the_cpi_calls_newest_version_and_drops_test_suites(tmp_path):
    site = fake_site_packages(tmp_path)
    before = files(site)
    removed_files, removed_bytes = lean.strip(site)
    assert files(site) == {f for f in before if not f.startswith(("pygments", "setuptools", "markdown_it"))} - {
        "botocore/data/ec2/2015-10-01/service-2.json.gz",
        "botocore/data/ec2/2016-11-15/examples-1.json",
        "botocore/data/s3/2006-03-01/service-2.json.gz",
        "botocore/data/sagemaker/2017-07-24/service-2.json.gz",
        "openstack/tests/unit/test_connection.py",
        "openstack/tests/__pycache__/__init__.cpython-311.pyc",
        "keystoneauth1/tests/unit/test_session.py",
        "pbr/tests/test_version.py",
        "pkg/sub/test/data.txt",
        "pkg_resources/__init__.py",
        "_distutils_hack/__init__.py",
        "distutils-precedence.pth",
    }
    assert not (site / "botocore/data/s3").exists() and not (site / "openstack/tests").exists()
    assert not (tmp_path / "venv/bin/pygmentize").exists(), "a script the distribution's RECORD lists"
    assert (tmp_path / "venv/bin/rich-thing").exists() and (tmp_path / "outside.txt").exists()
    # botocore 4, test suites 5; pygments 6, setuptools 6, markdown-it-py 3 (.dist-info included)
    assert removed_files == 24 and removed_bytes > removed_files
def test_strip_without_botocore_only_drops_test_suites(tmp_path):
    write(tmp_path / "site/pkg/tests/test_a.py", "x")
    write(tmp_path / "site/pkg/a.py", "x")
    assert lean.strip(tmp_path / "site") == (1, 1)
    assert files(tmp_path / "site") == {"pkg/a.py"}


def test_the_packaging_script_runs_it_with_the_standard_library_only(tmp_path):
    """packages/cpi/packaging runs `python -I cpi/release/lean.py SITE_PACKAGES`: no project
    import may be needed (the cpi package is not importable from the compile directory)."""
    site = fake_site_packages(tmp_path)
    result = subprocess.run([sys.executable, "-I", str(LEAN), str(site)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "package cpi: left out 24 files (0.0 MB) the CPI never reads" in result.stdout
    assert not (site / "openstack/tests").exists()
    usage = subprocess.run([sys.executable, "-I", str(LEAN)], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "usage: lean.py SITE_PACKAGES" in usage.stderr
    packaging = (REPO / "packages/cpi/packaging").read_text()
    assert '"$venv/bin/python" -I cpi/release/lean.py "$site_packages"' in packaging
    assert '"$venv/bin/python" -I cpi/release/lean.py --check' in packaging


# --- the AWS services and operations the code uses ---------------------------------------------


def _calls(paths):
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                yield path, node


def _name(func) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _strings(args) -> list[str | None]:
    return [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in args]


def services_the_code_uses() -> set[str]:
    """Every service named to create_client()/client()/_make_client() anywhere in cpi/, the
    first of two string arguments `("svc", "Operation")` in the AWS cloud, and the AWS
    session's SERVICES."""
    from cpi.clouds.aws import session

    found = set(session.SERVICES)
    for path, call in _calls(CODE):
        strings = _strings(call.args)
        makes_client = _name(call.func) in ("create_client", "_make_client", "client", "create_nested_client")
        if makes_client and strings[:1] and strings[0] and re.fullmatch(r"[a-z0-9-]+", strings[0]):
            found.add(strings[0])
        if path in AWS_CODE:
            for first, second in pairwise(strings):
                if first and second and re.fullmatch(r"[a-z0-9-]+", first) and CAMEL.match(second):
                    found.add(first)
    return found


def test_every_service_the_code_makes_a_client_for_is_kept():
    used = services_the_code_uses()
    assert {"ec2", "ebs", "sts", "elb", "elbv2", "iam"} <= used, f"the search is out of date: found {sorted(used)}"
    assert used <= set(lean.BOTOCORE_SERVICES), (
        f"add to cpi/release/lean.py BOTOCORE_SERVICES: {sorted(used - set(lean.BOTOCORE_SERVICES))} "
        f"(package cpi ships botocore's data only for those)"
    )


def copy_botocore(site: Path) -> Path:
    """site/botocore: a copy of the botocore this checkout runs (hard links where possible)."""
    import botocore

    source = Path(botocore.__file__).parent
    try:
        shutil.copytree(source, site / "botocore", copy_function=os.link, ignore=shutil.ignore_patterns("__pycache__"))
    except OSError:  # another file system: copy
        shutil.rmtree(site / "botocore", ignore_errors=True)
        shutil.copytree(source, site / "botocore", ignore=shutil.ignore_patterns("__pycache__"))
    return site


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """A copy of this checkout's botocore, stripped as package cpi strips it; what a client of
    each kept service knows there, made through the CPI's own AWS session (full models, not
    the slim EC2 one) in a process that imports that copy."""
    site = copy_botocore(tmp_path_factory.mktemp("lean") / "site-packages")
    lean.strip(site)
    probe = f"""
import json, botocore, botocore.session
assert botocore.__file__.startswith({str(site)!r}), botocore.__file__
from cpi.clouds.aws.job_config import AwsProperties
from cpi.clouds.aws.session import Aws
aws = Aws(AwsProperties(region="us-east-1", access_key_id="a", secret_access_key="b", slim_models=False))
clients = {{service: aws.client(service) for service in {list(lean.BOTOCORE_SERVICES)!r} if service != "iam"}}
clients["iam"] = botocore.session.Session().create_client(
    "iam", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
print(json.dumps({{service: {{"version": c.meta.service_model.api_version,
                             "operations": sorted(c.meta.service_model.operation_names)}}
                  for service, c in clients.items()}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)])
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def full_models() -> dict[str, dict]:
    """Each kept service's newest model in this checkout's (unstripped) botocore."""
    import botocore.loaders

    loader = botocore.loaders.Loader()
    return {service: loader.load_service_model(service, "service-2") for service in lean.BOTOCORE_SERVICES}


def operations_the_code_calls(models: dict[str, dict]) -> set[tuple[str, str]]:
    """(service, Operation) for every operation the AWS cloud names: `ec2("Op")`, a string
    pair `("svc", "Op")` (call, _send), a CamelCase string that is an operation of a kept
    service (helpers taking the name, slim.OPERATIONS, audit tables), and a client method
    called on a variable named after its service (`iam.get_instance_profile(...)`)."""
    from botocore import xform_name

    by_name = {}
    for service, model in models.items():
        for operation in model["operations"]:
            by_name.setdefault(operation, set()).add(service)
    snake = {(service, xform_name(op)): op for service, model in models.items() for op in model["operations"]}
    found = set()
    for path in AWS_CODE:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in by_name:
                found |= {(service, node.value) for service in by_name[node.value]}
    for _, call in _calls(AWS_CODE):
        strings = _strings(call.args)
        if _name(call.func) == "ec2" and strings[:1] and strings[0] and CAMEL.match(strings[0]):
            found.add(("ec2", strings[0]))
        for first, second in pairwise(strings):
            if first in lean.BOTOCORE_SERVICES and second and CAMEL.match(second):
                found.add((first, second))
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in models:
            service = func.value.id
            if not func.attr.startswith("_") and func.attr not in ("meta", "close", "get_paginator", "get_waiter"):
                found.add((service, snake.get((service, func.attr), func.attr)))
    return found


def test_every_operation_the_code_calls_is_in_the_data_left(shipped):
    models = full_models()
    called = operations_the_code_calls(models)
    services = {service for service, _ in called}
    assert {"ec2", "ebs", "sts", "elb", "elbv2", "iam"} <= services, f"the search is out of date: {sorted(called)}"
    for expected in (("ebs", "StartSnapshot"), ("elbv2", "RegisterTargets"), ("sts", "AssumeRole"),
                     ("iam", "GetInstanceProfile"), ("ec2", "RunInstances"), ("ec2", "DescribeKeyPairs")):
        assert expected in called, f"the search is out of date: {expected} not found"
    missing = sorted((s, op) for s, op in called if op not in shipped[s]["operations"])
    assert not missing, f"operations the code calls that the stripped botocore data lacks: {missing}"


def test_the_stripped_data_is_the_version_botocore_loads_by_default(shipped):
    for service, model in full_models().items():
        assert shipped[service]["version"] == model["metadata"]["apiVersion"], service
        assert shipped[service]["operations"] == sorted(model["operations"]), service


def test_the_slim_ec2_model_can_fall_back_to_the_shipped_full_model(shipped):
    from cpi.clouds.aws import slim

    assert set(slim.OPERATIONS) <= set(shipped["ec2"]["operations"])


def test_check_finds_a_service_without_data(tmp_path):
    """`lean.py --check` (run at the end of packages/cpi/packaging) fails, naming the
    service, when botocore cannot make a client of a kept service."""
    site = copy_botocore(tmp_path / "site-packages")
    shutil.rmtree(site / "botocore/data/sts")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, str(LEAN), "--check"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 1
    assert "package cpi: botocore cannot make a client: sts:" in result.stderr


IMPORT_PROBE = r"""
import importlib, importlib.abc, pkgutil, sys

blocked = set(sys.argv[1].split(","))
reached = []


class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        parts = name.split(".")
        if parts[0] in blocked or set(parts[1:]) & {"tests", "test"}:  # test suites are left out too
            reached.append((name, sys._getframe(1).f_globals.get("__name__")))
            raise ImportError(f"{name} is not installed in package cpi")
        return None


sys.meta_path.insert(0, Block())
import cpi

for module in pkgutil.walk_packages(cpi.__path__, "cpi."):
    if module.name.endswith("__main__"):
        continue
    importlib.import_module(module.name)
# what the clouds import only when they run: their SDKs' clients and plugins
import botocore.session, openstack.connection, keystoneauth1.loading
from cpi.clouds.aws.job_config import AwsProperties
from cpi.clouds.aws.session import Aws

Aws(AwsProperties(region="us-east-1", access_key_id="a", secret_access_key="b")).client("ec2")
keystoneauth1.loading.get_plugin_loader("password")
from rich.console import Console
from rich.table import Table
from rich.progress import Progress

Console(file=open("/dev/null", "w")).print(Table("a", "b"))
if reached:
    sys.exit(f"imported although package cpi does not install them: {reached}")
"""


def test_the_cpi_never_imports_the_distributions_package_cpi_leaves_out():
    """Every module under cpi/ imported, and the SDK paths the clouds take at run time, with
    the modules of UNUSED_DISTRIBUTIONS and packages' test suites made unimportable (as in
    the installed package)."""
    blocked = sorted({module for modules in lean.UNUSED_DISTRIBUTIONS.values() for module in modules})
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(REPO)
    env["SETUPTOOLS_USE_DISTUTILS"] = "stdlib"  # this checkout's venv has setuptools' .pth hook
    result = subprocess.run([sys.executable, "-c", IMPORT_PROBE, ",".join(blocked)], capture_output=True, text=True,
                            env=env, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
