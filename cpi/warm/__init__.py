"""The warm helper: a per-user fork server, so a call need not import pydantic, the models
and its cloud afresh (issue #12: ~100 ms of every cold call; a local method within 3x the
bare interpreter's start).

On by default; CPI_HELPER_IDLE_TIMEOUT=<seconds> sets its idle time, 0 turns it off. Then
bin/cpi is a small client (this module, standard library only, imported before anything
else):

- it connects to the helper's Unix socket, in ~/.cache/bosh-cpi/helper (0700, its own user's,
  which it checks: owner, mode, not a link; an unsafe one is named on stderr and the call is
  made cold), and checks the helper's uid (SO_PEERCRED);
- it reads the request off its stdin (an `info` it then answers itself: that is quicker
  than handing it over), and passes the request, its stdin, stdout and stderr (SCM_RIGHTS),
  its working directory (an fd), its argv, environment and umask; the helper forks a worker
  that takes them all on and runs the very code a cold bin/cpi runs (cpi.rpc.serve) on the
  client's own descriptors: the same response, the same log lines on the same stderr, the
  same exit code;
- the worker announces itself ("S pid"); the client answers "G" (go), with its
  descriptors; only then does the worker begin the call. Until "S" nothing is done and no
  descriptor has left the client, so a missing, refusing, stale, dead or slow helper (no
  "S" within START_TIMEOUT) means the client makes the call itself, cold: the same answer,
  never an error. A late worker sees the client gone instead of "G" and exits without
  acting;
- the exit status reaches the client from the helper (which reaps its workers) or from the
  worker itself ("X code"); a worker killed by a signal ("K sig") kills the client with the
  same signal, as a cold process killed there would have died. The helper mirrors each of
  its worker's stops and continuations on the client itself, in the order they come (a
  worker continued directly, or killed while stopped, never leaves its client stopped), and
  continuing the client continues the worker. SIGTERM, SIGINT and SIGHUP sent to the client
  are passed on to its worker; a client that ends any other way (SIGKILL) ends its worker
  at once: the worker watches its connection, and each worker holds only its own client's
  connection (never another call's).

A cold call whose helper is missing starts one (detached, its stdio on /dev/null, after the
response is written); the helper closes every other descriptor it inherited and moves to
"/", keeping nothing of that call. It imports and builds everything a call needs before it
listens, forks one worker per request (parallel calls stay parallel; no state passes from
one call to the next: each worker starts from the helper's pristine memory), refuses calls
and exits when what it serves changed on disk (a file of the CPI's own code, or a
directory of its import path: a dependency or plugin installed; a change made while it was
still loading counts too), exits within seconds once its install is gone, and exits after
the idle time. Config files are read by each worker, as by each cold call: nothing of
a config is kept.

Differences from a cold process that remain: the worker's pid and parent, its session and
process group, and its resource limits and supplementary groups (the helper's).

The package's modules, so the wire (cpi.rpc) imports none of them and each side loads only
its own part: `where` (the settings and the socket's place, shared), `client` (what
bin/cpi runs: standard library only, imported before `site`), `server` (the helper's fork
server) and `boot` (what the helper preloads, then serves).
"""
