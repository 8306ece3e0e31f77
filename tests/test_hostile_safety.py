"""`kb lint` knows which commands need root and which fixes are destructive, and the
sudoers rule spark-tui proposes names exactly what it runs as root — never a shell."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from spark_tui import shell
from spark_tui.entry import main
from spark_tui.errors import InputErrors
from spark_tui.kb.loader import load_dir, load_knowledge
from spark_tui.kb.safety import check_fix, command_effects
from spark_tui.remedy.render import evidence_command, preview_lines
from spark_tui.remedy.sudoers import root_commands, sudoers_hint, sudoers_rule
from tests.conftest import require_tool

ROOT = Path(__file__).resolve().parent.parent
BASE = """\
id: my-wall
title: A wall of my own
severity: error
kind: log
engines: [any]
summary: Something broke.
signatures:
  - log: 'it broke'
fixes:
  - id: my-fix
    title: Fix it
    risk: {risk}
    root: {fix_root}
    actions:
      - type: run
        on: all
        command: {command}
        root: {root}
references: [https://example.org/issue/1]
"""


def lint(tmp_path: Path, **fields: object) -> list[str]:
    """The loader's errors for the wall (each 'file:line: message'), [] when it loads."""
    values = {"risk": "safe", "fix_root": "false", "root": "false", "command": "true"}
    values.update({k: str(v) for k, v in fields.items()})
    d = tmp_path / "kb"
    d.mkdir(exist_ok=True)
    path = d / "my-wall.yaml"
    path.write_text(BASE.format(**values))
    try:
        load_dir(d)
    except InputErrors as exc:
        return [str(e).replace(str(path), "F") for e in exc.errors]
    return []


def test_sudo_reboot_at_risk_safe_is_refused_in_kb_lint(tmp_path: Path, capsys) -> None:
    """The attempt that held: `run: "sudo reboot"` at `risk: safe` said all valid."""
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "my-wall.yaml").write_text(
        BASE.format(risk="safe", fix_root="false", root="false", command="sudo reboot")
    )
    assert main(["kb", "lint", str(tmp_path / "kb")]) == 2
    err = capsys.readouterr().err.replace(str(tmp_path / "kb" / "my-wall.yaml"), "F")
    assert err == (
        "spark-tui: F:17: fix 1 (my-fix): the command calls sudo itself: write it without sudo "
        "and set root: true (spark-tui runs it with sudo -n, which never asks for a password)\n"
        "F:12: fix 1 (my-fix): risk is safe, but action 1 runs reboot: it must be destructive\n"
    )


def test_the_same_reboot_declared_honestly_loads_and_renders_with_sudo_n(tmp_path: Path) -> None:
    assert lint(tmp_path, command="reboot", root="true", fix_root="true", risk="destructive") == []
    wall = load_dir(tmp_path / "kb")["my-wall"]
    assert preview_lines(wall.fixes[0]) == ["# on every node:", "sudo -n reboot"]


@pytest.mark.parametrize(
    "command, risk",
    [
        ("poweroff", "destructive"),
        ("shutdown -r now", "destructive"),
        ("systemctl reboot", "destructive"),
        ("mv /etc/modprobe.d/x.conf /root/x.conf", "destructive"),
        ("rm -rf /var/lib/docker", "destructive"),
        ("dd if=/dev/zero of=/dev/nvme0n1 bs=1M", "destructive"),
        ("mkfs.ext4 /dev/nvme0n1p2", "destructive"),
        ("sed -i s/a/b/ /etc/fstab", "destructive"),
        ("tee -a /etc/fstab", "destructive"),
        ("sysctl -w vm.swappiness=10", "disruptive"),
        ("ip link set dev {node.fabric_if} down", "disruptive"),
        ("nvidia-smi -r", "disruptive"),
        ("nvidia-smi --lock-gpu-clocks=200,2150", "disruptive"),
        ("systemctl restart docker", "disruptive"),
        ("modprobe -r nvidia_drm", "disruptive"),
    ],
)
def test_root_commands_must_say_root_and_their_risk(
    tmp_path: Path, command: str, risk: str
) -> None:
    errors = lint(tmp_path, command=command)
    assert errors and errors[0].startswith("F:17: fix 1 (my-fix): the command needs root ("), errors
    assert errors[0].endswith("set root: true on the action and on the fix")
    assert errors[-1].startswith("F:12: fix 1 (my-fix): risk is safe, but action 1 ")
    assert errors[-1].endswith(
        f"it must be {risk}" + (" or destructive" if risk == "disruptive" else "")
    )
    ok = lint(tmp_path, command=command, root="true", fix_root="true", risk=risk)
    assert ok == [], ok


@pytest.mark.parametrize(
    "command, risk",
    [
        ("docker stop ray-head", "disruptive"),
        ("docker rm -f ray-head", "destructive"),
        ("pkill -f vllm", "disruptive"),
        ("ray stop --force", "disruptive"),
        ("for c in $(docker ps -q); do docker kill $c; done", "disruptive"),
        ("sh -c 'rm -rf $HOME/.cache/huggingface'", "destructive"),
        ("echo hi > $HOME/notes.txt", "destructive"),
    ],
)
def test_user_commands_carry_their_risk(tmp_path: Path, command: str, risk: str) -> None:
    errors = lint(tmp_path, command=json_quote(command))
    assert len(errors) == 1 and errors[0].startswith("F:12: fix 1 (my-fix): risk is safe"), errors
    assert errors[0].endswith(
        f"it must be {risk}" + (" or destructive" if risk == "disruptive" else "")
    )
    assert lint(tmp_path, command=json_quote(command), risk=risk) == []


def test_a_reboot_hidden_in_a_command_substitution_is_seen(tmp_path: Path) -> None:
    errors = lint(tmp_path, command=json_quote('echo "$(reboot)"'), risk="destructive")
    assert errors == [
        "F:17: fix 1 (my-fix): the command needs root (reboot): set root: true on the action "
        "and on the fix"
    ]


def json_quote(text: str) -> str:
    import json

    return json.dumps(text)


@pytest.mark.parametrize(
    "command",
    [
        "true",
        "sync",
        "nvidia-smi --query-gpu=memory.used --format=csv",
        "ip -br addr",
        "find -L $HOME/.cache/huggingface/hub -name '*.safetensors' -printf '%s %p\\n'",
        "echo done > /dev/null",
    ],
)
def test_read_only_commands_stay_safe_without_root(tmp_path: Path, command: str) -> None:
    assert lint(tmp_path, command=json_quote(command)) == []


@pytest.mark.parametrize(
    "command",
    [
        "docker update --restart=no ray-head",  # changes a container's configuration
        "echo done | tee /dev/null /tmp/done.txt",  # writes a file (a planted symlink …)
        "cat /proc/meminfo > /tmp/meminfo.txt",
    ],
)
def test_commands_that_change_something_are_not_safe_even_in_scratch(
    tmp_path: Path, command: str
) -> None:
    (error,) = lint(tmp_path, command=json_quote(command))
    assert error.startswith("F:12: fix 1 (my-fix): risk is safe, but action 1 is not known to")
    assert lint(tmp_path, command=json_quote(command), risk="disruptive") == []


def test_a_root_command_must_not_need_a_shell(tmp_path: Path) -> None:
    errors = lint(
        tmp_path, command='"sync; echo 3 > /proc/sys/vm/drop_caches"', root="true", fix_root="true"
    )
    assert errors == [
        "F:17: fix 1 (my-fix): a command run as root must be one program and its arguments "
        "(no ;, |, >, $(…), globs), so that a sudoers rule can allow exactly it and not a root "
        "shell: split it into actions (sysctl -w writes /proc/sys)"
    ]


def test_an_action_as_root_needs_the_fix_to_say_root(tmp_path: Path) -> None:
    errors = lint(tmp_path, command="sysctl -w vm.drop_caches=3", root="true", fix_root="false")
    assert errors == [
        "F:13: fix 1 (my-fix): action 1 runs as root: say root: true on the fix "
        "(the preview and the confirmation tell the user)"
    ]


@pytest.mark.parametrize(
    "action, risk",
    [
        ("{type: reboot, on: seen}", "destructive"),
        ("{type: move-aside, path: /etc/x.conf}", "destructive"),
        ("{type: stop-stack}", "disruptive"),
        ("{type: relaunch, clean: true}", "disruptive"),
        ("{type: restart-ray, args: {--num-gpus: 1}}", "disruptive"),
    ],
)
def test_typed_actions_carry_their_risk(tmp_path: Path, action: str, risk: str) -> None:
    d = tmp_path / "kb"
    d.mkdir()
    text = BASE.format(risk="safe", fix_root="true", root="false", command="true")
    text = text.replace(
        "      - type: run\n        on: all\n        command: true\n        root: false\n",
        f"      - {action}\n",
    )
    (d / "my-wall.yaml").write_text(text)
    with pytest.raises(InputErrors) as info:
        load_dir(d)
    assert [e.line for e in info.value.errors] == [12]
    assert info.value.errors[0].reason.endswith(
        f"it must be {risk}" + (" or destructive" if risk == "disruptive" else "")
    )
    (d / "my-wall.yaml").write_text(text.replace("risk: safe", f"risk: {risk}"))
    assert load_dir(d)["my-wall"].fixes[0].risk == risk


def test_every_built_in_wall_passes() -> None:
    kb = load_knowledge(use_user=False)  # the loader runs the checks: it would raise
    assert len(kb) >= 30
    as_root = []
    for wall in kb:
        for fix in wall.fixes:
            assert check_fix(fix) == [], (wall.id, fix.id)
            for action in fix.actions:
                if action.type == "run" and action.params.get("root"):
                    command = shell._PLACEHOLDER.sub("X", action.params["command"])
                    assert shell.simple_words(command) is not None, (wall.id, fix.id)
                    as_root.append(action.params["command"])
    assert set(as_root) == {
        "sysctl -w vm.drop_caches=3",
        "ip link set dev {node.fabric_if} mtu 9000",
        "nvidia-smi -lgc 200,2150",
        "dmesg -T",  # engine-process-killed: read the kernel's log (who killed the engine)
    }


def test_the_drop_caches_command_is_read_as_root_and_safe() -> None:
    eff = command_effects("sysctl -w vm.drop_caches=3")
    assert (eff.risk, eff.root, eff.shell, eff.sudo) == ("safe", ["sysctl"], False, False)
    old = command_effects("sync; echo 3 > /proc/sys/vm/drop_caches")
    assert (old.risk, old.root, old.shell) == ("safe", ["writes /proc/sys/vm/drop_caches"], True)


# ---------------------------------------------------------------- the sudoers rule


def rule_commands(walls=None) -> list[list[str]]:
    return root_commands(walls)


def test_the_hint_names_every_root_command_and_never_a_shell() -> None:
    hint = sudoers_hint()
    assert "/usr/bin/sh" not in hint and " sh " not in hint and "bash" not in hint
    assert "NOPASSWD: /usr/bin/sh" not in hint
    commands = rule_commands()
    programs = {c[0] for c in commands}
    assert not programs & {"sh", "bash", "dash", "env", "sudo", "su"}
    # what spark-tui itself runs as root: drop caches, the evidence read as root
    assert ["sysctl", "-w", "vm.drop_caches=3"] in commands
    assert shlex.split(evidence_command("kernel-log-previous-boot", None, "T"))[2:] in commands
    assert shlex.split(evidence_command("pstore", None, "T"))[2:] in commands
    # and every root action of the knowledge base
    assert ["reboot"] in commands
    assert any(c[:3] == ["mv", "-n", "--"] for c in commands)
    assert ["ip", "link", "set", "dev", "<node.fabric_if>", "mtu", "9000"] in commands
    assert ["nvidia-smi", "-lgc", "200,2150"] in commands
    for line in hint.splitlines()[1:-1]:
        assert re.match(r"  (Cmnd_Alias SPARK_TUI = |    )/usr/s?bin/", line), line


def test_the_hint_for_a_node_names_its_interface() -> None:
    hint = sudoers_hint(values={"node.fabric_if": "enp1s0f0np0"}, user="milo")
    assert "/usr/sbin/ip link set dev enp1s0f0np0 mtu 9000" in hint
    assert "  milo ALL=(root) NOPASSWD: SPARK_TUI" in hint
    # no `*` (it matches spaces): one word of an interface name's characters
    assert "/usr/sbin/ip ^link set dev [A-Za-z0-9_.\\:-]{1\\,15} mtu 9000$" in sudoers_hint()


def test_every_command_that_runs_as_root_is_in_the_rule() -> None:
    """The rule comes from the same action registry as what runs: plan every fix of the
    knowledge base for a two-node cluster (as the engine does), render every evidence
    item, strip `sudo -n`: each root command is in the rule for that node."""
    from spark_tui.action_schemas import EVIDENCE_ITEMS
    from spark_tui.nodes.cluster import ClusterConfig, NodeConfig
    from spark_tui.remedy.actions import kind
    from spark_tui.remedy.actions.base import PlanContext

    nodes = (
        NodeConfig("spark1", "10.0.0.1", "head", fabric_if="enp1s0f0np0", fabric_ip="10.10.10.1"),
        NodeConfig("spark2", "10.0.0.2", "worker", fabric_if="enp1s0f0np0", fabric_ip="10.10.10.2"),
    )
    cluster = ClusterConfig(nodes=nodes)
    commands = root_commands(values=nodes[1].placeholder_values(nodes[0]))
    rendered = [shell.drop_caches().split("; ", 1)[1]]
    planned = 0
    for wall in load_knowledge():
        for fix in wall.fixes:
            for i, action in enumerate(fix.actions):
                ctx = PlanContext(cluster, None, "spark2", "SPARKTUISTAMP", fix.id)
                try:
                    plan = kind(action.type).plan(i, action, ctx)
                except Exception:  # a relaunch or a recipe patch: it needs a recipe
                    continue
                planned += 1
                rendered += [c.command for c in plan.commands]
    assert planned > 20
    rendered += [evidence_command(i, None, "SPARKTUISTAMP") for i in EVIDENCE_ITEMS]
    checked = 0
    for line in rendered:
        if re.search(r"(^|[;&|(]\s*)sudo ", line):  # a command that runs sudo
            assert line.startswith("sudo -n ") and " sh -c " not in line, line
            assert shlex.split(line)[2:] in commands, line
            checked += 1
    assert checked >= 6


def test_visudo_accepts_the_rule(tmp_path: Path) -> None:
    visudo = require_tool("visudo")
    rule = tmp_path / "spark-tui"
    rule.write_text(sudoers_rule(rule_commands(), user="nobody") + "\n")
    r = subprocess.run([visudo, "-c", "-f", str(rule)], capture_output=True, text=True)
    assert r.returncode == 0 and "parsed OK" in r.stdout, r.stdout + r.stderr


def test_the_preview_of_a_root_command_with_a_placeholder_has_the_form_that_runs() -> None:
    """kb show's cluster-free preview and the per-node command are both `sudo -n CMD`."""
    from spark_tui.remedy.render import preview_lines

    fix = load_knowledge(use_user=False).get("fabric-slow").fix("fabric-mtu-9000")
    assert fix is not None
    assert "sudo -n ip link set dev <node.fabric_if> mtu 9000" in preview_lines(fix)
