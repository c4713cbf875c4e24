"""The admin side of a deployment inside one SLURM allocation: wait for every site, submit the job, wait for it,
download its results, shut the system down.

Through FLARE's API and the admin kit; the job goes once every site has registered (the gang scheduling P2P needs)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from lightyear.deploy.project import DEFAULT_ADMIN


def log(message: str) -> None:
    print(f"[admin {time.strftime('%H:%M:%S')}] {message}", flush=True)


def connect(kit: str, user: str, timeout: float):
    """A session with the server, retried until ``timeout`` s (the server may still be starting)."""
    from nvflare.fuel.flare_api.flare_api import new_secure_session

    deadline = time.monotonic() + timeout
    while True:
        try:
            return new_secure_session(user, kit, timeout=min(30.0, max(5.0, deadline - time.monotonic())))
        except Exception as e:  # FLARE raises several kinds while the server is not up yet
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no admin session with the server within {timeout:g} s ({e})") from None
            time.sleep(3.0)


def wait_for_sites(session, sites: list[str], timeout: float) -> None:
    """Return once every site in ``sites`` is registered with the server; else TimeoutError naming the missing."""
    deadline = time.monotonic() + timeout
    missing = list(sites)
    while time.monotonic() < deadline:
        connected = {c.name for c in session.get_system_info().client_info}
        missing = [s for s in sites if s not in connected]
        if not missing:
            return
        time.sleep(2.0)
    raise TimeoutError(f"sites {missing} did not connect to the server within {timeout:g} s: see their logs")


def shutdown(session) -> None:
    """Shut down every site and the server; a system already going down is no error."""
    try:
        session.shutdown("all")
    except Exception as e:
        log(f"shutdown: {e}")


def run(args) -> int:
    session = connect(args.kit, args.user, args.connect_timeout)
    try:
        log("connected; waiting for " + ", ".join(args.sites))
        wait_for_sites(session, args.sites, args.connect_timeout)
        job_id = session.submit_job(os.path.abspath(args.job))
        log(f"submitted {args.job} as {job_id}")
        with open(os.path.join(args.out, "flare_job_id"), "w") as f:
            f.write(job_id + "\n")
        meta = session.wait_for_job(job_id, timeout=args.job_timeout)
        log(f"job {job_id} ended: {meta.get('status')}")
        path = session.download_job_result(job_id, os.path.join(args.out, "server"))
        log(f"results downloaded to {path}")
        return 0
    finally:
        if not args.keep_running:
            log("shutting down the server and every site")
            shutdown(session)
        session.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lightyear.deploy.slurm.admin", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("run", "shutdown"))
    ap.add_argument("--kit", required=True, help="the admin's startup kit (folder holding startup/)")
    ap.add_argument("--user", default=DEFAULT_ADMIN)
    ap.add_argument("--job", help="run: the job folder")
    ap.add_argument("--sites", nargs="+", default=[], help="run: the sites to wait for")
    ap.add_argument("--out", help="run: the results folder")
    ap.add_argument("--connect-timeout", type=float, default=600.0, help="seconds for the server and sites to come up")
    ap.add_argument("--job-timeout", type=float, default=0.0, help="seconds to wait for the job (0: until it ends)")
    ap.add_argument("--keep-running", action="store_true", help="run: leave the system up afterwards")
    args = ap.parse_args(argv)
    try:
        if args.action == "shutdown":
            session = connect(args.kit, args.user, args.connect_timeout)
            shutdown(session)
            session.close()
            return 0
        if not (args.job and args.sites and args.out):
            ap.error("run needs --job, --sites and --out")
        return run(args)
    except Exception as e:
        log(f"failed: {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
