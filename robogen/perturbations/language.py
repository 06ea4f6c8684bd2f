"""The ``language`` axis: the instruction a prompted policy gets, paraphrased and cluttered.

For a policy that takes a prompt (``remote:...?prompt=...``, or any policy with a
``prompt`` attribute and ``set_prompts``: :class:`~robogen.policies.base.Prompted`), each
episode's instruction is rewritten from the shipped edits in
``robogen/assets/language/prompts.json`` (LIBERO-Plus's language dimension; LADEV,
Wang et al. 2024, paraphrases instructions the same way):

* a paraphrase **template** wrapping the instruction (``"could you {prompt}?"``), with
  probability ``min(1, 2 m)``;
* word **synonyms** (``pick -> grab``), each word that has one replaced with probability ``m``;
* ``round(2 m)`` **distractor clauses** appended (``"...; ignore the blue cup"``).

``m`` is the episode's magnitude in ``[severity / 2, severity]``; an episode drawn without a
template or a clause gets a template (its synonyms may not occur in the prompt), so every
episode of a level > 0 is edited, whatever the instruction. The same
draws apply to any instruction: the rewritten text depends on the policy's prompt and is
recorded by the rollout worker (``applied.prompt``).

Splits: the templates, synonyms and clauses each come in disjoint train and test halves
(``all``: both).

A policy without a prompt cannot observe the axis: its gap is flagged "not observed by
this policy" (the scene, the observation and the actions are untouched).
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, ClassVar

import numpy as np

from robogen.perturbations import helpers as u
from robogen.perturbations.base import Axis, Perturbation, register_axis

MAX_CLAUSES = 2
"""Distractor clauses appended at magnitude 1."""


@cache
def prompt_edits() -> dict[str, Any]:
    """The shipped edits (``templates``, ``synonyms``, ``clauses``, each by split)."""
    text = resources.files("robogen").joinpath("assets/language/prompts.json").read_text()
    return json.loads(text)


def _pool(kind: str, split: str) -> Any:
    """The ``kind`` edits of ``split``: a list (templates, clauses) or word -> list of
    replacements (synonyms); ``all`` joins both halves."""
    edits = prompt_edits()[kind]
    halves = [edits[s] for s in (("train", "test") if split not in ("train", "test")
                                 else (split,))]
    if isinstance(halves[0], dict):
        return {k: [h[k] for h in halves if k in h] for k in halves[0]}
    return [x for h in halves for x in h]


@dataclass(frozen=True, slots=True)
class LanguagePerturbation(Perturbation):
    """The instruction edits of one episode.

    Attributes:
        template: Paraphrase template with ``{prompt}``, or ``""`` for none.
        synonyms: ``(word, replacement)`` pairs applied (whole words, case-insensitive).
        clauses: Distractor clauses appended, in order.
    """

    axis: ClassVar[str] = "language"
    EDITS_PROMPT: ClassVar[bool] = True

    template: str
    synonyms: tuple[tuple[str, str], ...]
    clauses: tuple[str, ...]

    def edit_prompt(self, prompt: str) -> str:
        """The rewritten instruction (synonyms, then the template, then the clauses)."""
        text = prompt
        for word, new in self.synonyms:
            text = re.sub(rf"\b{re.escape(word)}\b", new, text, flags=re.IGNORECASE)
        if self.template:
            text = self.template.replace("{prompt}", text)
        if self.clauses:
            text = "; ".join((text, *self.clauses))
        return text


@register_axis("language")
class LanguageAxis(Axis):
    """Paraphrased instructions and distractor clauses for policies that take a prompt."""

    kind: ClassVar[str] = "language"
    distinct_values: ClassVar[str] = ""  # a per-step process / an instruction, not a scene
    description: ClassVar[str] = (
        "prompt rewritten per episode: paraphrase templates, synonyms, distractor clauses")

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The template, replacement words and clauses (held-out ones)."""
        return frozenset(({values["template"]} - {""}) | {new for _, new in values["synonyms"]}
                         | set(values["clauses"]))

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: Any
               ) -> LanguagePerturbation:
        """Draw the episode's template, synonyms and clauses from the split's halves."""
        m = u.check_and_magnitude(rng, severity, split)
        templates = _pool("templates", split)
        synonyms = _pool("synonyms", split)
        clauses = _pool("clauses", split)
        template = templates[int(rng.integers(len(templates)))] \
            if rng.random() < min(1.0, 2.0 * m) else ""
        swaps = []
        for word in sorted(synonyms):
            options = synonyms[word]
            choice = options[int(rng.integers(len(options)))]
            if rng.random() < m:
                swaps.append((word, choice))
        n = round(MAX_CLAUSES * m)
        picked = tuple(clauses[int(i)] for i in rng.permutation(len(clauses))[:n])
        if not template and not picked:  # synonyms may not occur in the prompt
            template = templates[int(rng.integers(len(templates)))]
        return LanguagePerturbation(template=template, synonyms=tuple(swaps), clauses=picked)
