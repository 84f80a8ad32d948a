"""The soak's samples, verdicts and report. A sample (:func:`sample`) is the server's
RSS, the last health window, the clients' tally and the server's counter at one moment;
:func:`memory` gives RSS after the warm-up and at the end and least-squares slopes in
MB/min after the warm-up and over the last half of the run (does it level off?), over
every sample and over those between overload bursts (a burst lifts RSS while it lasts);
the gates (:func:`slope_ok`, :func:`health_ok`, :func:`counts_match`) fail on no data;
:func:`report` gathers them with health p50/p99/max and failures, throughput, the tally
against the counter per (method, code), the server's allocator environment (``MALLOC_*``,
``LD_PRELOAD``, ``GLIBC_TUNABLES``) and the versions into the JSON that :func:`markdown`
renders."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import platform
import shlex
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata

from loadtest.machine import cpu_name, shown
from loadtest.soakload import MIX, OVERLOAD_MIX, Tally
from loadtest.soakprobe import (
    HealthSampler,
    Target,
    _round,
    allocator_env,
    delta,
    quantile,
    read_rss,
    scrape,
)

log = logging.getLogger("loadtest.soak")


# -- numbers ---------------------------------------------------------------------------


def slope_per_minute(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of ``(seconds, MB)`` points, in MB per minute; NaN with fewer
    than two points or no spread in time, or when any value is not finite."""
    pts = list(points)
    if len(pts) < 2 or not all(math.isfinite(t) and math.isfinite(v) for t, v in pts):
        return float("nan")
    mt = sum(t for t, _ in pts) / len(pts)
    mv = sum(v for _, v in pts) / len(pts)
    sxx = sum((t - mt) ** 2 for t, _ in pts)
    if sxx == 0:
        return float("nan")
    return 60.0 * sum((t - mt) * (v - mv) for t, v in pts) / sxx


def slope_ok(slope: float, max_slope: float) -> bool:
    """The memory gate: a finite slope at most ``max_slope`` MB/min (NaN, from no
    samples, fails)."""
    return math.isfinite(slope) and math.isfinite(max_slope) and slope <= max_slope


def health_ok(health: dict) -> bool:
    """At least one check, none failed."""
    return health.get("checks", 0) > 0 and health.get("failures", 1) == 0


GAVE_UP = ("CANCELLED", "DEADLINE_EXCEEDED")


def counts_match(client: dict[str, int], server: dict[str, float]) -> bool:
    """Every call counted once: per method the client's and the server's totals are
    equal, and not empty. Codes may differ only for calls the client gave up on
    (CANCELLED, DEADLINE_EXCEEDED) at the moment the server answered: the server counts
    those with its own status, so it can count more of any other code, never fewer."""
    if not client:
        return False
    keys = set(client) | set(server)
    methods = {k.split(" ")[0] for k in keys}
    for method in methods:
        mine = {k: v for k, v in client.items() if k.startswith(method + " ")}
        theirs = {k: v for k, v in server.items() if k.startswith(method + " ")}
        if sum(mine.values()) != sum(theirs.values()):
            return False
    for k in keys:
        gave_up = k.split(" ")[-1] in GAVE_UP
        c, v = client.get(k, 0), server.get(k, 0)
        if (gave_up and v > c) or (not gave_up and v < c):
            return False
    return True


# -- the report ------------------------------------------------------------------------


def versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in ("grpcio", "onnxruntime", "onnxruntime-gpu", "protobuf", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    out["libc"] = " ".join(platform.libc_ver())
    return out


def sample(
    target: Target, tally: Tally, health: HealthSampler, health_index: int, before: dict, t: float
) -> dict:
    try:
        metrics = scrape(target.metrics_port)
    except (OSError, ValueError) as exc:
        log.warning("could not scrape /metrics: %s", exc)
        metrics = None
    row = {"t_s": round(t, 1)} | read_rss(target, metrics)
    row |= health.window_summary(health_index)
    row["client_calls"] = tally.total()
    if metrics is not None:
        row["server_calls"] = sum(delta(metrics["requests"], before).values())
        row["inflight"] = metrics["inflight"]
        row["metrics_rss_mb"] = (
            round(metrics["rss_bytes"] / 2**20, 2) if metrics["rss_bytes"] is not None else None
        )
    return row


def progress(row: dict, duration: float) -> None:
    log.info(
        "soak %.1f/%.1f min: rss %s MB, %d calls, health p99 %s ms, %d health failures",
        row["t_s"] / 60,
        duration / 60,
        row.get("rss_mb"),
        row["client_calls"],
        row.get("health_p99_ms"),
        row.get("health_failures", 0),
    )


def memory(
    samples: list[dict],
    warmup: float,
    wall: float,
    bursts: Sequence[tuple[float, float]] = (),
    tail: float = 10.0,
) -> dict:
    """RSS after the warm-up (the first sample outside a burst) and at the end, and
    least-squares slopes after the warm-up and over the last half of the run: over every
    sample, and over the samples between overload bursts (a burst raises RSS while it
    lasts; samples up to ``tail`` s after one are left out too)."""

    def quiet(t: float) -> bool:
        return not any(a <= t <= b + tail for a, b in bursts)

    pts = [(s["t_s"], s["rss_mb"]) for s in samples if s.get("rss_mb") is not None]
    after = [p for p in pts if p[0] >= warmup]
    last_half = [p for p in pts if p[0] >= wall / 2]
    calm = [p for p in after if quiet(p[0])]
    anon = [
        (s["t_s"], s["rss_anon_mb"])
        for s in samples
        if s.get("rss_anon_mb") is not None and s["t_s"] >= wall / 2
    ]
    return {
        "source": next((s["rss_source"] for s in samples if s.get("rss_source")), None),
        "samples": len(pts),
        "samples_after_warmup": len(after),
        "samples_last_half": len(last_half),
        "rss_start_mb": (calm or after)[0][1] if after else None,
        "rss_start_t_s": (calm or after)[0][0] if after else None,
        "rss_end_mb": pts[-1][1] if pts else None,
        "rss_max_mb": max(v for _, v in pts) if pts else None,
        "rss_quiet_min_last_half_mb": min((v for t, v in calm if t >= wall / 2), default=None),
        "rss_quiet_max_last_half_mb": max((v for t, v in calm if t >= wall / 2), default=None),
        "slope_after_warmup_mb_per_min": _round(slope_per_minute(after), 3),
        "slope_last_half_mb_per_min": _round(slope_per_minute(last_half), 3),
        "quiet_slope_after_warmup_mb_per_min": _round(slope_per_minute(calm), 3),
        "quiet_slope_last_half_mb_per_min": _round(
            slope_per_minute([p for p in calm if p[0] >= wall / 2]), 3
        ),
        "anon_slope_last_half_mb_per_min": _round(slope_per_minute(anon), 3),
    }


def report(
    args,
    server_args,
    argv,
    target: Target,
    samples,
    final,
    tally: Tally,
    health: HealthSampler,
    client_counts,
    server_counts,
    after,
    wall,
    interrupted,
    lagging,
    overload,
    keeper,
    server_rc,
    gc: list[dict],
) -> dict:
    mem = memory(samples, args.warmup, wall, overload.bursts if overload else (), args.sample_every)
    hs = health.summary()
    keys = sorted(set(client_counts) | set(server_counts))
    counts = [
        {
            "method": k.split()[0],
            "code": k.split()[1],
            "client": client_counts.get(k, 0),
            "server": server_counts.get(k, 0),
        }
        for k in keys
    ]
    for row in counts:
        row["match"] = row["client"] == row["server"]
    match = counts_match(client_counts, server_counts)
    kinds = {}
    with tally.lock:
        for (kind, code), n in sorted(tally.kinds.items()):
            kinds.setdefault(kind, {"codes": {}})["codes"][code] = n
        for kind, lat in tally.latencies.items():
            kinds[kind] |= {
                "ok_p50_ms": _round(1000 * quantile(lat, 0.5), 1),
                "ok_p99_ms": _round(1000 * quantile(lat, 0.99), 1),
            }
        sentences = tally.sentences
        ok_calls = sum(n for (_, code), n in tally.calls.items() if code == "OK")
    total = sum(client_counts.values())
    env = target.env
    slope = mem["slope_last_half_mb_per_min"]
    slope_value = float("nan") if slope is None else slope
    verdicts = {
        "health_never_failed": health_ok(hs),
        "counts_match": match,
        "server_exit_0": None if target.server is None else server_rc == 0,
        "slope_within_limit": None
        if args.max_slope is None
        else slope_ok(slope_value, args.max_slope),
    }
    lines = [
        f"health never failed ({hs['checks']} checks)"
        if verdicts["health_never_failed"]
        else f"health FAILED: {hs['failures']} of {hs['checks']} checks "
        f"({', '.join(f'{k} {v}' for k, v in hs['failure_codes'].items()) or 'no checks'})",
        f"counts match ({total} calls, {len(keys)} (method, code) pairs; "
        f"{sum(r['client'] - r['server'] for r in counts if r['code'] in GAVE_UP)} that "
        "the client gave up on as the server answered are counted with the server's status)"
        if match
        else "counts DO NOT match: "
        + ", ".join(
            f"{r['method']} {r['code']} client {r['client']} server {r['server']}"
            for r in counts
            if not r["match"]
        )
        or "no calls",
        f"memory slope last half {_fmt(slope, 3)} MB/min (between overload bursts "
        f"{_fmt(mem['quiet_slope_last_half_mb_per_min'], 3)} MB/min)"
        + (
            ""
            if args.max_slope is None
            else f" ({'within' if verdicts['slope_within_limit'] else 'OVER'} --max-slope "
            f"{args.max_slope:g})"
        ),
    ]
    if target.server is not None:
        lines.append(f"nmt-serve exited {server_rc} after SIGTERM")
    server_log = None
    if target.server is not None:
        text = target.server.log_path.read_text(encoding="utf-8", errors="replace")
        server_log = {
            "lines": len(text.splitlines()),
            "errors": sum(" ERROR " in ln or "Traceback" in ln for ln in text.splitlines()),
            "warnings": sum(" WARNING " in ln for ln in text.splitlines()),
            "path": str(target.server.log_path),
            "error_lines": [ln for ln in text.splitlines() if " ERROR " in ln or "Traceback" in ln][
                :10
            ],
        }
    return {
        "settings": {
            "command": shlex.join(["python", "-m", "loadtest.soak", *argv]),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "minutes": args.minutes,
            "clients": args.clients,
            "mix": dict(MIX),
            "overload": args.overload,
            "overload_clients": overload.clients if overload else 0,
            "overload_bursts_s": [[round(a, 1), round(b, 1)] for a, b in overload.bursts]
            if overload
            else [],
            "overload_mix": dict(OVERLOAD_MIX),
            "max_inflight": args.max_inflight,
            "half_open": args.half_open,
            "warmup_s": args.warmup,
            "sample_every_s": args.sample_every,
            "health_every_s": args.health_every,
            "sentence_file": shown(args.file),
            "started_server": target.server is not None,
            "server_command": shlex.join(target.server.command[1:]) if target.server else None,
            "server_pid": target.pid,
            "server_allocator_env": allocator_env(env) if env is not None else None,
            "nproc": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)),
            "cpu": cpu_name(),
            "kernel": platform.release(),
            "versions": versions(),
        },
        "verdict": lines,
        "verdicts": verdicts,
        "passed": all(v is not False for v in verdicts.values()),
        "interrupted": interrupted,
        "wall_s": round(wall, 1),
        "memory": mem,
        "health": hs,
        "throughput": {
            "calls": total,
            "calls_per_s": _round(total / wall, 1) if wall > 0 else None,
            "ok_calls": ok_calls,
            "ok_sentences": sentences,
            "ok_sentences_per_s": _round(sentences / wall, 1) if wall > 0 else None,
        },
        "kinds": kinds,
        "counts": counts,
        "rejected": after.get("rejected", {}),
        "gc_pauses": gc,
        "unsettled": {"client_threads": lagging, "half_open": keeper.unsettled if keeper else 0},
        "server_log": server_log,
        "samples": samples,
        "final_sample": final,
    }


def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if digits != 3 else f"{value:.3f}"
    return str(value)


def markdown(r: dict) -> str:
    s, m, h, t = r["settings"], r["memory"], r["health"], r["throughput"]
    v = s["versions"]
    env = s["server_allocator_env"]
    env_text = (
        "unknown (server not started here; give --pid)"
        if env is None
        else ", ".join(f"`{k}={val}`" for k, val in env.items()) or "none (glibc malloc defaults)"
    )
    out = [
        f"# Soak: {s['minutes']:g} min, {s['clients']} clients",
        "",
        f"`{s['command']}`",
        "",
        f"* date {s['date']}; {s['nproc']} CPUs ({s['affinity']} usable), {s['cpu']}; "
        f"Linux {s['kernel']}",
        f"* Python {v['python']}, grpcio {v.get('grpcio', '–')}, onnxruntime "
        f"{v.get('onnxruntime') or v.get('onnxruntime-gpu', '–')}, protobuf "
        f"{v.get('protobuf', '–')}, numpy {v.get('numpy', '–')}, {v['libc']}",
        "* server: "
        + (
            f"`{s['server_command']}` (pid {s['server_pid']})"
            if s["started_server"]
            else f"already running (pid {s['server_pid']})"
        ),
        f"* allocator environment of the server: {env_text}",
        f"* load: {s['clients']} closed-loop clients over `{s['sentence_file']}`; "
        + (
            f"overload bursts of {s['overload_clients']} more clients "
            f"({s['overload']:g} x max-inflight {s['max_inflight']}) at "
            + ", ".join(f"{a:g}–{b:g} s" for a, b in s["overload_bursts_s"])
            if s["overload_clients"]
            else "no overload"
        )
        + f"; {s['half_open']} half-open calls"
        + f"; health checked every {s['health_every_s']:g} s from a process of its own",
        f"* ran {r['wall_s']:g} s" + (" (interrupted)" if r["interrupted"] else ""),
        "",
        "## Verdict",
        "",
        *[f"* {line}" for line in r["verdict"]],
        "",
        "## Memory",
        "",
        f"RSS from {m['source']}, a sample every {s['sample_every_s']:g} s, baseline after "
        f"a {s['warmup_s']:g} s warm-up.",
        "",
        "| | after warm-up | last half |",
        "|---|---|---|",
        f"| RSS slope, every sample | {_fmt(m['slope_after_warmup_mb_per_min'], 3)} MB/min | "
        f"{_fmt(m['slope_last_half_mb_per_min'], 3)} MB/min |",
        f"| RSS slope, between overload bursts | "
        f"{_fmt(m['quiet_slope_after_warmup_mb_per_min'], 3)} MB/min | "
        f"{_fmt(m['quiet_slope_last_half_mb_per_min'], 3)} MB/min |",
        f"| anonymous RSS slope, every sample | – | "
        f"{_fmt(m['anon_slope_last_half_mb_per_min'], 3)} MB/min |",
        "",
        f"RSS after the warm-up {_fmt(m['rss_start_mb'])} MB (t={_fmt(m['rss_start_t_s'])} s), "
        f"at the end {_fmt(m['rss_end_mb'])} MB, at most {_fmt(m['rss_max_mb'])} MB; between "
        f"bursts in the last half {_fmt(m['rss_quiet_min_last_half_mb'])}–"
        f"{_fmt(m['rss_quiet_max_last_half_mb'])} MB.",
        "",
        "## Health checks",
        "",
        "| checks | failures | p50 ms | p99 ms | max ms | first check of a connection, max ms |",
        "|---|---|---|---|---|---|",
        f"| {h['checks']} | {h['failures']} {h['failure_codes'] or ''} | {_fmt(h['p50_ms'], 3)} "
        f"| {_fmt(h['p99_ms'], 3)} | {_fmt(h['max_ms'], 3)} | {_fmt(h['first_check_max_ms'], 3)} |",
        "",
        "## Throughput",
        "",
        f"{t['calls']} calls ({_fmt(t['calls_per_s'])}/s), {t['ok_calls']} OK, "
        f"{t['ok_sentences']} sentences translated ({_fmt(t['ok_sentences_per_s'])}/s). "
        f"Server refusals: "
        + ", ".join(f"{k} {v_}" for k, v_ in sorted(r["rejected"].items()))
        + ".",
        "",
        "| kind | codes | OK p50 ms | OK p99 ms |",
        "|---|---|---|---|",
        *[
            f"| {k} | {', '.join(f'{c} {n}' for c, n in d['codes'].items())} | "
            f"{_fmt(d.get('ok_p50_ms'))} | {_fmt(d.get('ok_p99_ms'))} |"
            for k, d in r["kinds"].items()
        ],
        "",
        "## Collector pauses (`nmt_gc_pause_seconds`, start of the load to its end)",
        "",
        "Every pass stops every Python thread of its process; the bounds are the "
        "histogram's buckets.",
        "",
        "| process | generation | passes | per s | seconds | % of wall | 99% under ms | "
        "all under ms |",
        "|---|---|---|---|---|---|---|---|",
        *[
            f"| {g['process']} | {g['generation']} | {g['passes']} | {_fmt(g['per_s'], 2)} | "
            f"{_fmt(g['seconds'], 3)} | {_fmt(g['wall_pct'], 2)} | {_fmt(g['p99_under_ms'], 3)} | "
            f"{_fmt(g['max_under_ms'], 3)} |"
            for g in r["gc_pauses"]
        ],
        "",
        "## Client tally vs nmt_requests_total",
        "",
        "| method | code | clients saw | server counted | |",
        "|---|---|---|---|---|",
        *[
            f"| {c['method']} | {c['code']} | {c['client']} | {c['server']} | "
            f"{'=' if c['match'] else 'DIFFERENT'} |"
            for c in r["counts"]
        ],
    ]
    if r["server_log"] is not None:
        sl = r["server_log"]
        out += [
            "",
            f"Server log: {sl['lines']} lines, {sl['warnings']} warnings, {sl['errors']} errors.",
        ]
        out += [f"    {line}" for line in sl["error_lines"]]
    if r["unsettled"]["client_threads"] or r["unsettled"]["half_open"]:
        out += ["", f"Unsettled at the end: {r['unsettled']}"]
    shown_rows, minutes = [], set()
    for x in r["samples"]:
        if int(x["t_s"] // 60) not in minutes:
            minutes.add(int(x["t_s"] // 60))
            shown_rows.append(x)
    if r["samples"] and r["samples"][-1] is not shown_rows[-1]:
        shown_rows.append(r["samples"][-1])
    out += [
        "",
        "## Samples (the first of each minute; every sample is in the JSON)",
        "",
        "| t s | RSS MB | anon MB | file MB | threads | calls | health p99 ms | "
        "health max ms | in flight |",
        "|---|---|---|---|---|---|---|---|---|",
        *[
            f"| {x['t_s']:g} | {_fmt(x.get('rss_mb'))} | {_fmt(x.get('rss_anon_mb'))} | "
            f"{_fmt(x.get('rss_file_mb'))} | {_fmt(x.get('threads'))} | {x['client_calls']} | "
            f"{_fmt(x.get('health_p99_ms'), 3)} | {_fmt(x.get('health_max_ms'), 3)} | "
            f"{_fmt(x.get('inflight'), 0)} |"
            for x in shown_rows
        ],
    ]
    return "\n".join(out) + "\n"
