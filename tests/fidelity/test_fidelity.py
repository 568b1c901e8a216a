"""The fidelity corpus: every program, run under the simulated host through the real sandbox, ends the way it
ended (or, where no GPU has been available, the way torch's sources say it ends) on a real CUDA host."""

from __future__ import annotations

import pytest

from tests.support.corpus import EXPECTED, compare, load_corpus

CORPUS = load_corpus()
MIN_PROGRAMS = 40  # issue 12: at least forty programs in real-world styles


def test_the_corpus_is_large_and_every_program_has_an_expectation():
    assert len(CORPUS) >= MIN_PROGRAMS
    missing = [p.name for p in CORPUS if not p.expected]
    assert not missing, f"write tests/fidelity/expected/<program>.json for {missing}"
    assert {p.name for p in CORPUS} == {path.stem for path in EXPECTED.glob("*.json")}


@pytest.mark.parametrize("program", CORPUS, ids=[p.name for p in CORPUS])
def test_expectation_says_where_it_comes_from(program):
    assert program.expected.get("source") in ("recorded", "derived")
    if program.expected["source"] == "recorded":
        assert program.expected.get("gpu") and program.expected.get("torch")
    else:
        assert program.expected.get("derived_from"), "a derived expectation names the torch source it follows"


@pytest.mark.parametrize("program", CORPUS, ids=[p.name for p in CORPUS])
def test_program_behaves_as_on_a_real_cuda_host(fidelity_runner, program):
    assert compare(fidelity_runner, program) == []
