"""The guided bring-up, end to end on the simulated cluster: the form writes cluster.yaml
with the fabric interface found on the nodes; a failed step lands on its diagnosis with
the fix ready; after the fix the bring-up resumes and ends serving, with tok/s."""

from __future__ import annotations

import asyncio

from textual.widgets import Input, Select

from spark_tui import paths
from spark_tui.nodes.config import load_cluster
from spark_tui.tui.messages import ActionFinished
from spark_tui.tui.screens.bringup_screen import BringUpScreen
from spark_tui.tui.screens.fix_modal import FixModal
from spark_tui.tui.widgets.cluster_form import ClusterForm
from tests.test_tui_live import live_app, wait_for


def _finished(seen: list, prefix: str) -> list[ActionFinished]:
    return [m for m in seen if isinstance(m, ActionFinished) and m.action.startswith(prefix)]


def test_cluster_form_offers_the_detected_fabric_interface_and_writes_cluster_yaml() -> None:
    async def scenario() -> None:
        app = live_app("healthy")
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("b")
            await wait_for(pilot, lambda: isinstance(app.screen, BringUpScreen))
            screen = app.screen
            screen._show("cluster")
            await pilot.pause()
            form = screen.query_one(ClusterForm)
            form.query_one("#form-hosts", Input).value = "spark1 spark2"
            form.query_one("#form-user", Input).value = "milo"
            await pilot.click("#form-detect")
            select = form.query_one("#form-fabric", Select)
            await wait_for(pilot, lambda: select.value == "enp1s0f0np0")
            await pilot.click("#form-write")
            path = paths.config_dir() / "cluster.yaml"
            await wait_for(pilot, path.is_file)
            cluster = load_cluster(path)
            assert [n.host for n in cluster.nodes] == ["spark1", "spark2"]
            assert cluster.head.name == "spark1" and cluster.nodes[1].role == "worker"
            assert {n.fabric_if for n in cluster.nodes} == {"enp1s0f0np0"}
            assert {n.user for n in cluster.nodes} == {"milo"}

    asyncio.run(scenario())


def test_bringup_end_to_end_lands_on_the_diagnosis_then_resumes_to_serving() -> None:
    from spark_tui.tui.screens.confirm_modal import ConfirmModal

    async def scenario() -> None:
        app = live_app("drm-override", speed=400.0)
        seen: list = []
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            drm = "drm-override-halves-memory"
            await wait_for(pilot, lambda: app.session.monitor is not None)
            monitor = app.session.monitor
            await wait_for(pilot, lambda: any(d.wall.id == drm for d in monitor.diagnoses()))
            await pilot.press("b")
            await wait_for(pilot, lambda: isinstance(app.screen, BringUpScreen))
            screen = app.screen
            assert screen.step == "doctor"  # cluster and recipe come from the simulated cluster
            await pilot.press("g")
            await wait_for(pilot, lambda: _finished(seen, "bring-up doctor"))
            assert not _finished(seen, "bring-up doctor")[-1].ok
            # the failed step lands on its diagnosis, the fix ready
            assert screen.outcome.diagnosis is not None and screen.outcome.diagnosis.wall.id == drm
            result = str(screen.query_one("#step-result").render())
            assert "Fix ready (a): " in result and "spark-tui-backup-" in result
            nodes = app.session.sim.nodes
            await pilot.press("a")
            await wait_for(pilot, lambda: isinstance(app.screen, FixModal))
            modal = app.screen
            assert modal.plan.fix.risk == "destructive"
            assert set(modal.plan.nodes) == {"spark1", "spark2"}
            assert modal.query_one("#cancel").has_focus  # the safe answer first
            await pilot.press("y")
            await wait_for(pilot, lambda: modal.phase == "done", limit_s=60)
            # the verify step ran on fresh readings after the reboot and says how it went
            question = str(modal.query_one("#fix-question").render())
            assert "files.drm_override == false on spark1: yes" in question, question
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.screen is screen)
            await wait_for(
                pilot, lambda: all(n.is_up() and not n.drm_active for n in nodes.values())
            )
            assert not any(n.drm_active for n in nodes.values())
            assert all(
                "/etc/modprobe.d/zz-nvidia-drm-override.conf" not in n.files for n in nodes.values()
            )
            # go on where it stopped: the doctor again, then every step to serving
            for step in ("doctor", "fixes", "launch", "serving"):
                await wait_for(pilot, lambda s=step: screen.step == s)
                await pilot.press("g")

                async def answered(s=step) -> bool:  # the launch is confirmed like any step
                    if isinstance(app.screen, ConfirmModal):
                        assert app.screen.prompt.startswith("Launch "), app.screen.prompt
                        await pilot.press("y")
                    return screen.driver.status(s) in ("ok", "failed") and not screen.running

                for _ in range(1800):
                    if await answered():
                        break
                    await pilot.pause(0.05)
                assert screen.driver.status(step) == "ok", (screen.outcome, app.screen_stack)
            assert "tok/s" in screen.outcome.summary
            # the same steps `up` takes: the doctor, the fixes, one launch, the soak
            kinds = [s.kind for s in app.driver.steps]
            assert kinds.count("launch") == 1 and kinds[-1] == "soak", kinds
            assert not any(isinstance(s, ConfirmModal) for s in app.screen_stack)

    asyncio.run(scenario())
