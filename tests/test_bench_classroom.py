"""The classroom benchmark's client against a real server: a session opens a page and its run is timed."""
import asyncio
from contextlib import ExitStack

import pytest


def test_one_learner_opens_inspect():
    pytest.importorskip("websockets", reason="the websockets package is not installed")
    from bench import classroom_load as load

    with ExitStack() as stack:
        folder = stack.enter_context(load.private_checkpoints())
        try:
            url, pid = stack.enter_context(load.app_server(folder))
        except RuntimeError as e:
            print(f"skipping: the app server did not start ({e})")
            pytest.skip("the app server did not start")

        async def open_inspect():
            learner, tally = load.Learner(url), load.Tally()
            await learner.connect()
            assert learner.finished == "ok" and "inspector" in learner.pages
            tally.add("page open", await learner.open("inspector"))
            seconds = await learner.change("inspect-head", load.next_option)  # a fragment's run
            await learner.close()
            return learner, tally, seconds

        learner, tally, seconds = asyncio.run(open_inspect())
    assert learner.finished == "fragment" and seconds > 0
    assert tally.count() == 1 and tally.seconds["page open"][0] > 0
    assert {"inspect-layer", "inspect-head", "inspect-tab"} <= set(learner.widgets)
