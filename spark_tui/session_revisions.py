"""A session's recipe revisions taken back: undo the last patch, roll back to what last
served. Journaled. A service of the session (its composition root)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_tui import policy
from spark_tui.errors import InputError, SparkTuiError

if TYPE_CHECKING:
    from spark_tui.recipes.model import Recipe
    from spark_tui.recipes.revisions import Served
    from spark_tui.session import Session


class RecipeRevisions:
    def __init__(self, session: Session) -> None:
        self.session = session

    def undo(self) -> Recipe:
        """Back to the recipe revision before the last patch (every revision stays on disk)."""
        r = self.session.recipe()
        if r is None:
            raise InputError("no recipe in use: nothing to undo")
        policy.refuse_if_read_only(f"undo the last patch of recipe {r.id}")
        journal = self.session.journal
        # journaled before it changes anything (a journal that cannot be written stops it)
        journal.append(event="started", action="recipe-undo", recipe=r.id, revision=r.revision)
        try:
            back = self.session.revisions.undo(r.id)
        except SparkTuiError as exc:
            journal.append(
                event="finished", action="recipe-undo", recipe=r.id, ok=False, message=str(exc)
            )
            raise
        journal.append(
            event="finished", action="recipe-undo", recipe=r.id, revision=back.revision, ok=True
        )
        return self.session.use_recipe(back)

    def rollback_preview(self, recipe_id: str | None = None) -> tuple[Recipe, Served, str]:
        """(the recipe in use, the launch that last served, the diff a rollback applies) for
        the recipe in use or `recipe_id`; InputError when none of its launches served."""
        from spark_tui.recipes.revisions import last_served, pinned, unified_diff

        r = self.session.recipes().get(recipe_id) if recipe_id else self.session.recipe()
        if r is None:
            raise InputError("no recipe in use: name one to roll back")
        current = self.session.revisions.current(r.id) or r
        served = last_served(self.session.revisions, r.id)
        if served is None:
            raise InputError(
                f"recipe {r.id!r} never served here (no launch's smoke request answered): "
                "nothing to roll back to"
            )
        return current, served, unified_diff(current, pinned(served), r.id)

    def rollback_image_lines(self, served: Served) -> list[str]:
        """What a rollback pins, in words: the image ID it served on (not the tag), what the
        tag names on each node now, and any node that no longer holds that image (the launch
        would fail there). Read from the nodes (`docker image inspect`); nothing changes."""
        from spark_tui import shell
        from spark_tui.nodes.transport import NodeUnreachable
        from spark_tui.recipes.revisions import IMAGE_ID

        if not served.image_id:
            return [
                f"image: {served.image or '(none)'} (its image ID was not recorded when it "
                "served: the tag is kept, whatever it names now)"
            ]
        short = served.image_id[:19]
        lines = [f"image: pinned to {served.image_id} — what {served.image} was when it served"]
        if served.mixed_images:
            lines.append(
                "  the nodes ran different images then: "
                + ", ".join(f"{n} {i[:19]}" for n, i in served.image_ids.items())
                + f"; the head's ({short}) is pinned"
            )
        nodes = list(served.image_ids) or [n.name for n in self.session.config.nodes]
        for node in nodes:
            transport = self.session.transports.get(node)
            if transport is None:
                continue
            refs = [served.image_id] + ([served.image] if served.image != served.image_id else [])
            command = "docker image inspect --format '{{.Id}}' "
            found: dict[str, str] = {}
            try:
                for ref in refs:
                    res = transport.run(command + shell.quote(ref), timeout=30)
                    iid = res.stdout.strip()
                    found[ref] = iid if res.ok and IMAGE_ID.fullmatch(iid) else ""
            except NodeUnreachable as exc:
                lines.append(f"  {node}: not checked ({exc.reason})")
                continue
            if not found[served.image_id]:
                lines.append(
                    f"  {node}: does not hold {short} any more: the launch would fail there "
                    "until the image is back on it"
                )
                continue
            tag_now = found.get(served.image, served.image_id)
            if tag_now and tag_now != served.image_id:
                lines.append(f"  {node}: holds {short}; {served.image} is {tag_now[:19]} now")
            else:
                lines.append(f"  {node}: holds {short}")
        return lines

    def rollback(self, recipe_id: str | None = None) -> Recipe:
        """Back to the image and recipe revision that last served, as a new revision (every
        revision stays on disk); journaled before and after. Takes effect at the next launch."""
        from spark_tui.recipes import revisions

        current, served, diff = self.rollback_preview(recipe_id)
        policy.refuse_if_read_only(f"roll back recipe {current.id}")
        self.session.journal.append(
            event="started",
            action="recipe-rollback",
            recipe=current.id,
            revision=current.revision,
            to_revision=served.revision,
            image=served.image,
            image_id=served.image_id,
        )
        after = revisions.rollback(self.session.revisions, current, served) if diff else current
        self.session.journal.append(
            event="finished",
            action="recipe-rollback",
            recipe=current.id,
            revision=after.revision,
            image=after.image,
            ok=True,
        )
        return self.session.use_recipe(after)
