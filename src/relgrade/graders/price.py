"""The price of a model grader's owed requests, before any is sent, and caps on a run.

Tokens are not counted with the provider's tokenizer (none ships with relgrade, and the grader
behind a command may be any model): a token is taken as **4 characters** of text, rounded up
per request or answer (:func:`approx_tokens`), a common rule of thumb for English prose. Real
tokenizers give about 3 to 5 characters per token on prose and code, so the price is given as
a range:

* prompt tokens: ``ceil(chars / 5)`` (low), ``ceil(chars / 4)`` (expected), ``ceil(chars / 3)``
  (high) of each rendered prompt;
* output tokens per chunk: the grade row ``{"query_id": …, "chunk_id": …, "reason": …,
  "grade": …}`` printed with an empty reason (low), a reason of half the cap (expected) or of
  the whole cap (high), where the cap is ``grading.max_reason_chars`` (and, when smaller,
  ``grading.max_reason_words`` × 6 characters); its characters are turned into tokens by the
  same three rules.

Cost = input tokens / 1000 × ``input_per_1k`` + output tokens / 1000 × ``output_per_1k``
(params ``prices``, :func:`price_for`). Retries (refused answers asked again) are not
included: each adds one request at the same price.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass
from typing import Mapping, Sequence

#: Characters per token for the low, expected and high counts.
CHARS_PER_TOKEN = {"low": 5, "expected": 4, "high": 3}

#: Characters per word assumed when ``grading.max_reason_words`` caps a reason.
CHARS_PER_WORD = 6


def approx_tokens(text: str, chars_per_token: int = CHARS_PER_TOKEN["expected"]) -> int:
    """Tokens in ``text`` by the characters-per-token rule: ``ceil(len(text) / chars_per_token)``.

    Examples
    --------
    >>> approx_tokens("abcdefghi"), approx_tokens("abcdefghi", 3), approx_tokens("")
    (3, 3, 0)
    """
    return math.ceil(len(text) / chars_per_token)


def reason_cap(max_reason_chars: int, max_reason_words: int | None = None) -> int:
    """The longest reason in characters: ``max_reason_chars``, or ``max_reason_words`` × 6
    when that is smaller.

    Examples
    --------
    >>> reason_cap(300), reason_cap(300, 20)
    (300, 120)
    """
    if max_reason_words is None:
        return int(max_reason_chars)
    return min(int(max_reason_chars), int(max_reason_words) * CHARS_PER_WORD)


def answer_chars(query_id: str, chunk_ids: Sequence[str], *, reason_chars: int,
                 scale: Sequence[int]) -> int:
    """Characters of an answer to one request: one grade row per chunk, each with a reason of
    ``reason_chars`` characters and the longest grade of the scale, each row ending in a line
    break.

    Examples
    --------
    >>> answer_chars("q1", ["c1"], reason_chars=0, scale=[0, 1, 2])
    63
    """
    g = max((len(str(x)) for x in scale), default=1)
    return sum(len(json.dumps({"query_id": str(query_id), "chunk_id": str(c),
                               "reason": "x" * int(reason_chars), "grade": 0},
                              ensure_ascii=False)) - 1 + g + 1 for c in chunk_ids)


@dataclass(frozen=True)
class Request:
    """One request the run would send: its rendered prompt's characters and the characters of
    its answer with empty, half-cap and full-cap reasons."""

    query_id: str
    chunks: int
    prompt_chars: int
    answer_chars: tuple  # (low, expected, high)


@dataclass(frozen=True)
class Estimate:
    """What a grader's owed requests would send and receive, and their price.

    Attributes
    ----------
    requests, chunks : int
        Requests (batches × samples owed) and chunks in them.
    prompt_tokens, output_tokens : dict of str to int
        ``low``, ``expected``, ``high`` token counts (see the module's rules).
    cost : dict of str to float, or None
        ``low``, ``expected``, ``high`` cost in the price table's currency units; None
        without a price.
    price : tuple of (float, float), or None
        (input per 1k tokens, output per 1k tokens) used.
    """

    requests: int
    chunks: int
    prompt_tokens: dict
    output_tokens: dict
    cost: dict | None
    price: tuple | None

    def lines(self, grader: str) -> list[str]:
        """The estimate as printed by ``grade run --dry-run`` and ``status``."""
        out = [f"{grader}: would send {self.requests} requests ({self.chunks} chunks); prompt "
               f"tokens ≈ {self.prompt_tokens['expected']} (range {self.prompt_tokens['low']}–"
               f"{self.prompt_tokens['high']}), output tokens ≈ "
               f"{self.output_tokens['expected']} (range {self.output_tokens['low']}–"
               f"{self.output_tokens['high']}); tokens approximated as characters / 4 "
               "(see docs/grading-at-scale.md)"]
        if self.cost is None:
            out.append(f"{grader}: no price (add prices.{grader} with input_per_1k and "
                       "output_per_1k to params to see the cost)")
        else:
            c = self.cost
            out.append(f"{grader}: cost low {c['low']:.4f}, expected {c['expected']:.4f}, "
                       f"high {c['high']:.4f} (at {self.price[0]:g} per 1k input tokens, "
                       f"{self.price[1]:g} per 1k output tokens)")
        return out


def request_of(query_id: str, chunk_ids: Sequence[str], prompt: str, *, reason_chars: int,
               scale: Sequence[int]) -> Request:
    """The :class:`Request` of one rendered prompt asking for ``chunk_ids``."""
    ans = tuple(answer_chars(query_id, chunk_ids, reason_chars=r, scale=scale)
                for r in (0, reason_chars // 2, reason_chars))
    return Request(str(query_id), len(chunk_ids), len(prompt), ans)


def cost_of(prompt_tokens: float, output_tokens: float, price: tuple) -> float:
    """``prompt_tokens / 1000 × price[0] + output_tokens / 1000 × price[1]``.

    Examples
    --------
    >>> cost_of(2000, 500, (0.5, 2.0))
    2.0
    """
    return prompt_tokens / 1000 * price[0] + output_tokens / 1000 * price[1]


def estimate(requests: Sequence[Request], price: tuple | None) -> Estimate:
    """Sum the token counts of ``requests`` under the three rules and price them.

    Parameters
    ----------
    requests : sequence of Request
    price : (float, float) or None
        Currency units per 1k input and per 1k output tokens (:func:`price_for`).

    Returns
    -------
    Estimate
    """
    prompt, output = {}, {}
    for i, (level, cpt) in enumerate(CHARS_PER_TOKEN.items()):
        prompt[level] = sum(math.ceil(r.prompt_chars / cpt) for r in requests)
        output[level] = sum(math.ceil(r.answer_chars[i] / cpt) for r in requests)
    cost = None if price is None else {
        k: cost_of(prompt[k], output[k], price) for k in CHARS_PER_TOKEN}
    return Estimate(requests=len(requests), chunks=sum(r.chunks for r in requests),
                    prompt_tokens=prompt, output_tokens=output, cost=cost, price=price)


def price_for(grader: str, spec: Mapping, prices: Mapping) -> tuple | None:
    """A grader's price: the price table's entry named after the grader, else after its
    ``model_id``, else after its ``model``.

    Parameters
    ----------
    grader : str
        The grader's name.
    spec : mapping
        Its params entry ``graders.NAME``.
    prices : mapping of str to mapping
        Params ``prices``: name → ``{"input_per_1k", "output_per_1k"}`` (checked by params).

    Returns
    -------
    (float, float) or None
        (input per 1k tokens, output per 1k tokens), or None when no entry applies.

    Examples
    --------
    >>> price_for("g", {"model": "m"}, {"m": {"input_per_1k": 1, "output_per_1k": 2}})
    (1.0, 2.0)
    """
    for name in (grader, spec.get("model_id"), spec.get("model")):
        if name is not None and str(name) in prices:
            p = prices[str(name)]
            return float(p["input_per_1k"]), float(p["output_per_1k"])
    return None


class Cap:
    """Caps on one ``grade run``: processes started and their estimated price.

    Each request is reserved before its process starts (:meth:`reserve`); a request that
    would make the calls exceed ``max_calls`` or the cost exceed ``max_cost`` is refused, so
    the cap is never crossed, also with several workers. The cost charged for a request is its
    expected cost (prompt characters / 4 tokens, output of a half-cap reason per chunk, see
    the module's rules), the same figure ``--dry-run`` prints as expected.

    Parameters
    ----------
    max_calls : int, optional
        Most processes to start (``--max-calls``), >= 1.
    max_cost : float, optional
        Most cost in currency units (``grading.max_cost``), > 0; needs ``price``.
    price : (float, float), optional
    reason_chars : int
        The reason cap in characters (:func:`reason_cap`).
    scale : sequence of int
    """

    def __init__(self, *, max_calls: int | None = None, max_cost: float | None = None,
                 price: tuple | None = None, reason_chars: int = 300,
                 scale: Sequence[int] = (0, 1, 2, 3)):
        self.max_calls, self.max_cost, self.price = max_calls, max_cost, price
        self.reason_chars, self.scale = int(reason_chars), list(scale)
        self.calls, self.cost = 0, 0.0
        self.reached: str | None = None
        self._lock = threading.Lock()

    def reserve(self, prompt: str, query_id: str, chunk_ids: Sequence[str]) -> bool:
        """Count one request about to be sent (its rendered prompt, or the bytes sent when
        there is none); False (and nothing counted) when it would cross a cap."""
        cost = 0.0
        if self.max_cost is not None:
            r = request_of(query_id, chunk_ids, prompt, reason_chars=self.reason_chars,
                           scale=self.scale)
            cost = estimate([r], self.price).cost["expected"]
        with self._lock:
            if self.max_calls is not None and self.calls + 1 > self.max_calls:
                self.reached = f"--max-calls {self.max_calls} reached after {self.calls} calls"
                return False
            if self.max_cost is not None and self.cost + cost > self.max_cost:
                self.reached = (f"grading.max_cost {self.max_cost:g} reached: {self.calls} "
                                f"calls cost ≈ {self.cost:.4f} and the next would cost "
                                f"≈ {cost:.4f}")
                return False
            self.calls += 1
            self.cost += cost
            return True
