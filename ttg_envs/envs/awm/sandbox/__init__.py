"""The AWM sandbox, one module per job, each named by the side it runs on.

Host side (the env's process): :mod:`.host_process` (the fork server and its children as seen from
the host, tool calls with time limits, :func:`~.host_process.run_verifier`), :mod:`.host_bwrap` (the
bubblewrap command line that starts the fork server), :mod:`.host_seccomp` (the system calls it
refuses), :mod:`.host_cgroup` (a sandbox's totals), :mod:`.host_folder` (the episode folder, read
without following the sandbox's paths), :mod:`.host_db` (episode databases and their snapshots).

Inside the sandbox (model-written code runs here): :mod:`.inside_forkserver` (forks the children),
:mod:`.inside_guard` (limits, audit hook and SQLite confinement set before any such code runs),
:mod:`.inside_app` (serves a scenario's app, forks it for a branch), :mod:`.inside_verifier` (runs a
verifier). The two sides speak JSON over sockets; no host module runs inside, and no inside module
is imported by the host except to name the fork server's entry point.
"""
