"""node_cpu.py --sections: the section timer counts calls and thread CPU and leaves no wrapper behind."""

from __future__ import annotations

import types

from dynik_ros.bench.sections import SectionTimer


class _Owner:
    def work(self, n: int) -> int:
        return sum(i * i for i in range(n))

    @staticmethod
    def helper(x: int) -> int:
        return x + 1


def test_wrapped_callables_answer_as_before_and_are_counted_then_restored():
    owner, module = _Owner(), types.ModuleType("m")
    module.function = lambda x: 2 * x
    instance_attribute = owner.__dict__.get("work")
    timer = SectionTimer()
    timer.wrap(_Owner, "work", "class method")
    timer.wrap(owner, "work", "instance method")  # over the class's wrapper: both count (nested sections)
    timer.wrap(owner, "helper", "static method")
    timer.wrap(module, "function", "module function")
    assert owner.work(20000) == sum(i * i for i in range(20000))
    assert owner.helper(1) == 2 and module.function(3) == 6
    timer.clear()  # the warm-up is forgotten
    for _ in range(3):
        owner.work(20000)
    assert timer.calls["instance method"] == timer.calls["class method"] == 3
    assert timer.cpu["instance method"] >= timer.cpu["class method"] > 0.0
    assert "static method" not in timer.calls
    timer.undo()
    assert owner.__dict__.get("work") is instance_attribute is None  # the instance has no own copy again
    assert _Owner.__dict__["work"].__name__ == "work" and not hasattr(_Owner.__dict__["work"], "__wrapped__")
    assert module.function(3) == 6 and not hasattr(module.function, "__wrapped__")
    assert "static method" in timer.table(3, ["static method"])
