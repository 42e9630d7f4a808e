"""The Redis store of the shared rate: one state per endpoint for every CPI process of
every director that names the same Redis (and key prefix), wherever they run.

An IaaS limits requests per account and region, not per machine: the file store lets one
director's processes slow down together while another director's keep the limit
saturated. Here each operation is one EVALSHA of a Lua script that applies policy.py's
rules to a hash on the server, atomically, on the server's clock (so directors whose
clocks differ still agree). Keys expire once idle for longer than `forget_after`.

Redis is an optimisation, never a condition of success: a Redis that cannot be reached,
answers slower than `redis_timeout`, or fails, makes this process fall back to the file
store (WithFallback) with one warning, and the call carries on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from . import policy

log = logging.getLogger("cpi.backoff")

#: policy.py, transcribed: current() (sane() included: a hash someone else wrote is data
#: from outside, and a key of another type is deleted) then apply(op). KEYS[1]: the state
#: hash. ARGV: op, max_rate, min_rate, burst, decrease, increase, forget_after, retry_after
#: ("" for none), a clock ("" for the server's; the tests hold the script against
#: policy.py step by step with their own), max_retry_after, policy.SKEW. Returns the result
#: as a string (a Lua number would be cut to an integer).
SCRIPT = """
local now = tonumber(ARGV[9])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local op = ARGV[1]
local max_rate, min_rate, burst = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local decrease, increase, forget = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local retry_after = tonumber(ARGV[8])
local max_retry_after, skew = tonumber(ARGV[10]), tonumber(ARGV[11])
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'hash' and kind ~= 'none' then redis.call('DEL', KEYS[1]) end
local s = redis.call('HMGET', KEYS[1], 'rate', 'tokens', 'updated', 'not_before', 'last_throttled', 'last_decrease')
local rate, tokens, updated, not_before, last_throttled, last_decrease
if s[1] and s[2] and s[3] and s[4] and s[5] and s[6] then
  rate, tokens, updated = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
  not_before, last_throttled, last_decrease = tonumber(s[4]), tonumber(s[5]), tonumber(s[6])
end
local function finite(x) return x ~= nil and x == x and x > -math.huge and x < math.huge end
local function past(t) return t >= 0 and t <= now + skew end
local sane = finite(rate) and finite(tokens) and finite(updated) and finite(not_before)
  and finite(last_throttled) and finite(last_decrease)
  and rate > 0 and tokens >= 0 and tokens <= burst + 1e-6
  and not_before >= 0 and not_before <= now + max_retry_after + skew
  and past(updated) and past(last_throttled) and past(last_decrease)
if not sane or (last_throttled > 0 and now - last_throttled > forget) then
  rate, tokens, updated, not_before, last_throttled, last_decrease = max_rate, burst, now, 0, 0, 0
end
rate = math.min(math.max(rate, min_rate), max_rate)
tokens = math.min(burst, tokens + math.max(0, now - updated) * rate)
updated = now
local result
if op == 'acquire' then
  if now < not_before then
    result = not_before - now
  elseif tokens >= 1 - 1e-6 then
    tokens = math.max(0, tokens - 1)
    result = 0
  else
    result = math.max(0.001, (1 - tokens) / rate)
  end
elseif op == 'throttled' then
  if now - last_decrease >= 1 then
    rate = math.max(min_rate, rate * decrease)
    last_decrease = now
  end
  tokens = math.min(tokens, 0)
  local pause = retry_after and math.min(retry_after, max_retry_after) or (1 / rate)
  not_before = math.max(not_before, now + pause)
  last_throttled = now
  result = rate
elseif op == 'succeeded' then
  if rate < max_rate then rate = math.min(max_rate, rate + increase) end
  result = rate
else
  return redis.error_reply('unknown backoff operation ' .. op)
end
local function str(x) return string.format('%.17g', x) end
redis.call('HSET', KEYS[1], 'rate', str(rate), 'tokens', str(tokens), 'updated', str(updated),
           'not_before', str(not_before), 'last_throttled', str(last_throttled), 'last_decrease', str(last_decrease))
redis.call('PEXPIRE', KEYS[1], math.ceil((forget + math.max(0, not_before - now) + 60) * 1000))
return str(result)
"""


class RedisStore:
    name = "redis"

    def __init__(self, readable_key: str, config: Any):
        import redis  # only when a Redis is configured: not on the path of other calls
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.config = config
        self.key = f"{config.redis_key_prefix}{readable_key}"
        options: dict[str, Any] = {
            # one attempt, bounded: redis-py would otherwise retry a refused connection 10
            # times with growing pauses, and a dead Redis must cost a call next to nothing
            "socket_timeout": config.redis_timeout, "socket_connect_timeout": config.redis_timeout,
            "retry": Retry(NoBackoff(), 0), "retry_on_timeout": False, "health_check_interval": 0,
        }
        if config.redis_username:
            options["username"] = config.redis_username
        if config.redis_password:
            options["password"] = config.redis_password
        if config.redis_ca_cert:
            options["ssl_ca_certs"] = str(config.redis_ca_cert)
        self.client = redis.Redis.from_url(config.redis_url, **options)
        self.script = self.client.register_script(SCRIPT)

    def step(self, op: str, retry_after: float | None = None, now: float | None = None) -> float:
        c = self.config
        args = [op, c.max_rate, c.min_rate, c.burst, c.decrease, c.increase, c.forget_after,
                "" if retry_after is None else repr(retry_after), "" if now is None else repr(now),
                c.max_retry_after, policy.SKEW]
        return float(self._bounded(lambda: self.script(keys=[self.key], args=args)))

    def _bounded(self, operation: Callable[[], Any]) -> Any:
        """`operation` within redis_timeout as a whole. redis-py's socket timeouts bound each
        read, so a Redis that trickles a byte every 0.2 s held a call for seconds; here the
        operation runs in a daemon thread that is left behind (with its connection, never
        used again: WithFallback moves to the file) when time is up."""
        import threading

        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["answer"] = operation()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as it is
                outcome["error"] = exc

        worker = threading.Thread(target=run, name="cpi-redis", daemon=True)
        worker.start()
        worker.join(self.config.redis_timeout)
        if worker.is_alive():
            raise TimeoutError(f"no whole answer within redis_timeout ({self.config.redis_timeout}s)")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["answer"]


class WithFallback:
    """The Redis store while it answers; the file store for the rest of this process's
    call from the first time it does not, for this endpoint and every other (one warning,
    naming the Redis and its setting, never an error). `down` holds the Redis URLs that
    failed in this call, shared by every endpoint's store, so a call touching several
    endpoints warns once and waits for a dead Redis once."""

    def __init__(self, primary: RedisStore, fallback: Callable[[], Any], down: set[str]):
        self.primary: Any = primary
        self._fallback = fallback
        self._down = down
        self.name = primary.name

    def step(self, op: str, retry_after: float | None = None) -> float:
        if self.name == "redis":
            url = self.primary.config.redis_url
            if url not in self._down:
                try:
                    return self.primary.step(op, retry_after)
                except Exception as exc:  # noqa: BLE001 - any Redis failure: the machine's own store will do
                    self._down.add(url)
                    log.warning("shared backoff: the Redis at %s (throttle.redis_url) %s; this call uses this "
                                "machine's throttle state instead", _where(self.primary),
                                _why(exc, self.primary.config))
            self.primary, self.name = self._fallback(), "file"
        return self.primary.step(op, retry_after)


def _why(exc: BaseException, config: Any) -> str:
    """What went wrong, in a few words: a connection that could not be opened says why."""
    from cpi import connecting

    if isinstance(exc, TimeoutError) or type(exc).__name__ == "TimeoutError":  # ours, or redis-py's
        return f"did not answer within throttle.redis_timeout ({config.redis_timeout:g}s)"
    opening = connecting.failure(exc)
    if opening is not None:
        return f"cannot be reached: {opening.reason}"
    return f"failed ({type(exc).__name__}: {exc})"


def _where(store: RedisStore) -> str:
    kwargs = store.client.connection_pool.connection_kwargs
    return f"{kwargs.get('host', kwargs.get('path', '?'))}:{kwargs.get('port', '')}".rstrip(":")
