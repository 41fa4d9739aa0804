"""The credit ledger: nothing created or lost, no negative balance, audit catches tampering."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mbb.protocol.scheduling.ledger import Ledger, LedgerError


def test_grant_pay_reset_and_audit() -> None:
    led = Ledger()
    led.grant("A", 100)
    led.grant("B", 50)
    assert led.pay("A", 30) == 70
    assert led.pay("B", 0) == 50
    assert (led.balances, led.revenue, led.granted) == ({"A": 70, "B": 50}, 30, 150)
    led.reset("A", 100)  # top up what was spent
    led.reset("B", 20)  # or take back
    assert (led.balances, led.granted) == ({"A": 100, "B": 20}, 150 + 30 - 30)
    led.audit()


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (lambda led: led.pay("A", 11), "cannot pay 11: balance 10"),
        (lambda led: led.pay("A", -1), "negative payment"),
        (lambda led: led.grant("A", -1), "negative credits"),
    ],
    ids=["overdraw", "negative-payment", "negative-grant"],
)
def test_ledger_refuses_impossible_operations(op, message) -> None:
    led = Ledger()
    led.grant("A", 10)
    with pytest.raises(LedgerError, match=message):
        op(led)
    assert led.balances == {"A": 10} and led.revenue == 0
    led.audit()


@pytest.mark.parametrize(
    "tamper",
    [
        lambda led: led.balances.update(A=led.balances["A"] + 1),
        lambda led: setattr(led, "revenue", led.revenue - 1),
        lambda led: led.balances.update(B=-1, A=led.balances["A"] + 1),
    ],
    ids=["created", "lost", "negative"],
)
def test_audit_catches_created_lost_or_negative_credits(tamper) -> None:
    led = Ledger()
    led.grant("A", 10)
    led.grant("B", 0)
    led.pay("A", 4)
    tamper(led)
    with pytest.raises(LedgerError):
        led.audit()


ops = st.lists(
    st.tuples(
        st.sampled_from(["grant", "pay", "reset"]), st.sampled_from("ABC"), st.integers(0, 500)
    ),
    max_size=40,
)


@settings(max_examples=100, deadline=None, database=None)
@given(ops)
def test_any_sequence_of_operations_conserves_credits(seq) -> None:
    led = Ledger()
    for name, who, amount in seq:
        if name == "grant":
            led.grant(who, amount)
        elif name == "reset":
            led.reset(who, amount)
        elif who in led.balances and amount <= led.balances[who]:
            led.pay(who, amount)
        else:
            with pytest.raises((LedgerError, KeyError)):
                led.pay(who, amount)
        assert sum(led.balances.values()) + led.revenue == led.granted
        assert min(led.balances.values(), default=0) >= 0
    led.audit()
