"""How a stage's process takes and gives back memory (relgrade.pipeline.memory)."""

from relgrade.pipeline import memory


def test_the_mmap_threshold_is_fixed_on_glibc_and_nothing_is_done_without_it(monkeypatch):
    import ctypes

    calls = []

    class Libc:
        def gnu_get_libc_version(self):
            return b"2.36"

        def mallopt(self, param, value):
            calls.append((param, value))
            return 1

    class Fn:  # ctypes function stand-ins accept restype/argtypes
        def __init__(self, f):
            self.f = f

        def __call__(self, *a):
            return self.f(*a)

    libc = Libc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: type("L", (), {
        "gnu_get_libc_version": Fn(libc.gnu_get_libc_version),
        "mallopt": Fn(libc.mallopt)})())
    assert memory.arrays_off_the_heap() is True
    assert calls == [(-3, 1 << 20)]  # M_MMAP_THRESHOLD, 1 MiB

    def no_libc(name):
        raise OSError("no C library of that name")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert memory.arrays_off_the_heap() is False

    # a C library without glibc's version call (musl): nothing is set
    monkeypatch.setattr(ctypes, "CDLL", lambda name: type("L", (), {
        "mallopt": Fn(libc.mallopt)})())
    assert memory.arrays_off_the_heap() is False
    assert len(calls) == 1


def test_handing_back_without_glibc_releases_arrows_pool_alone(monkeypatch):
    import ctypes

    released = []

    def no_libc(name):
        raise OSError("no C library of that name")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    monkeypatch.setattr(memory.pa, "default_memory_pool",
                        lambda: type("P", (), {"release_unused": lambda self: released.append(1)})())
    memory.hand_back()
    assert released == [1]
