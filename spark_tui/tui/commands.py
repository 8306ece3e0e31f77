"""The command palette's entries: every action of the app, by name."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

ACTIONS = (
    ("Apply the selected fix", "apply_fix", "preview the commands per node, confirm, run, verify"),
    ("Next fix of the selected wall", "next_fix", "mark the next fix in order"),
    ("Relaunch the recipe", "relaunch", "preview, confirm: stop, drop caches, launch, smoke"),
    ("Stop serving", "stop_stack", "stop the serving stack and Ray on every node (logs kept)"),
    ("Guided bring-up", "bringup", "cluster, recipe, doctor, fixes, Ray, launch, smoke"),
    ("Doctor", "doctor", "read-only preflight of every node"),
    ("Log: next wall line", "log('wall')", "scroll to the next line that matched a wall"),
    ("Log: previous wall line", "log('wall-back')", "scroll to the previous wall line"),
    ("Log: node", "log('node')", "every node merged, then each node"),
    ("Log: source", "log('origin')", "every source, then the serve log, each container"),
    ("Log: level", "log('level')", "every line, warnings and errors, errors only"),
    ("Log: follow on/off", "log('follow')", "keep the newest line in view"),
    ("Log: wrap long lines", "log('wrap')", "wrap, or scroll sideways (left/right)"),
    ("Search the log", "log('search')", "find text in the log"),
    ("Undo the last recipe patch", "undo", "restore the previous recipe revision"),
    (
        "Roll back to what last served",
        "rollback",
        "preview, confirm: the image and recipe revision of the last launch that served",
    ),
    ("Export the incident report", "export_report", "Markdown to paste into a forum post"),
    ("Journal of events", "events", "walls raised and resolved, steps taken (as watch --json)"),
    ("Dark / light theme", "toggle_theme", "switch themes"),
    ("Help", "help", "every key"),
    ("Quit", "request_quit", "leave spark-tui (asks while an action runs)"),
)


class SparkCommands(Provider):
    """Every action of the main screen; runs it as if its key were pressed."""

    def _run(self, action: str) -> None:
        # app-wide actions live on the app, the rest on the screen the palette was opened over
        app_wide = action in ("request_quit", "help", "toggle_theme", "bringup")
        name = f"app.{action}" if app_wide else action
        self.app.call_later(self.app.run_action, name, self.screen)

    async def discover(self) -> Hits:
        for name, action, help_text in ACTIONS:
            yield DiscoveryHit(name, partial(self._run, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, action, help_text in ACTIONS:
            score = matcher.match(name)
            if score > 0:
                yield Hit(
                    score, matcher.highlight(name), partial(self._run, action), help=help_text
                )
