#!/usr/bin/env python3
"""Writes the figures of scripts/bench-load.sh (its reports in OUT) into docs/benchmarks.md."""
import datetime, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchmark_section import write_section

out, devices, rate, duration, partitions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])

def report(name):
    try:
        return json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        return None

def verdict(value, target, unit, lower_is_better=True):
    if value is None:
        return "not measured"
    met = value <= target if lower_is_better else value >= target
    if met:
        return "met"
    off = (value - target) if lower_is_better else (target - value)
    return f"missed by {off:,.1f} {unit} ({off / target * 100:.0f} %)"

def latency(r, key, p="p99"):
    return (r or {}).get(key, {}).get(p)

def complete(r):
    results = (r or {}).get("results") or {}
    return "" if results.get("complete") else f" — INCOMPLETE: {results.get('missing')} results missing"

lines = []
register, broadcast, send, apns1, apns2 = (report(n) for n in ["register", "broadcast", "send", "apns-1", "apns-2"])
lines.append(f"Measured {datetime.date.today()} on this machine ({os.cpu_count()} cores shared by every process and the load generator): "
             f"release builds of `pushhub kafka-dev` (1 broker, {partitions} partitions per topic), `pushhub sim`, `pushhub-ingress` (SQLite), "
             f"`pushhub-dispatcher` and one worker per platform, each its own process; `pushhub load` on the same cores.")
lines.append("")
lines.append("| run | measured | target | |")
lines.append("|---|---|---|---|")
if register:
    reg = register["registrations"]
    lines.append(f"| register {devices:,} devices through the hub API (32 in flight) | {reg['perSecond']:,.0f}/s, p99 {latency(register, 'registerLatencyMs')} ms, {reg['failed']} failed "
                 f"| ≥ 8,000/s, p99 ≤ 20 ms | {verdict(reg['perSecond'], 8000, '/s', lower_is_better=False)}; p99 {verdict(latency(register, 'registerLatencyMs'), 20, 'ms')} |")
if broadcast:
    res = broadcast["results"]
    last = res.get("lastResultSeconds")
    recorded = res.get("outcomesRecordedSeconds")
    lines.append(f"| template broadcast to {res['expected']:,} devices (APNs 60 %, FCM 30 %, WNS 5 %, Web Push 5 %) | every result after {last:,.1f} s "
                 f"({res['deliveredPerSecond']:,.0f} delivered/s); outcomes recorded (Completed) after {recorded if recorded is not None else '—'} s{complete(broadcast)} "
                 f"| ≤ 30 s; Completed ≤ 1 s after the last result | {verdict(last, 30, 's')}; Completed "
                 f"{verdict(None if recorded is None or last is None else recorded - last, 1, 's')} after the last result |")
if send:
    sends, res = send["sends"], send["results"]
    lines.append(f"| native sends to single users, {rate:,}/s for {duration} s | {sends['accepted']:,} accepted ({sends['acceptedPerSecond']:,.0f}/s), {sends['failed']} failed; "
                 f"accept p99 {latency(send, 'acceptLatencyMs')} ms | p99 ≤ 20 ms | {verdict(latency(send, 'acceptLatencyMs'), 20, 'ms')} |")
    lines.append(f"| | end-to-end p50 {latency(send, 'endToEndLatencyMs', 'p50')} ms, p99 {latency(send, 'endToEndLatencyMs')} ms, "
                 f"{res['received']:,} of {res['expected']:,} results{complete(send)} | p99 ≤ 250 ms | {verdict(latency(send, 'endToEndLatencyMs'), 250, 'ms')} |")
if apns1 and apns2:
    one, two = apns1["results"], apns2["results"]
    ratio = two["deliveredPerSecond"] / one["deliveredPerSecond"] if one["deliveredPerSecond"] else 0
    lines.append(f"| APNs-only broadcast ({one['expected']:,} targets), one `pushhub-apns-worker` | {one['deliveredPerSecond']:,.0f} delivered/s, last result after {one['lastResultSeconds']} s{complete(apns1)} | | |")
    lines.append(f"| the same, two `pushhub-apns-worker` processes in the group | {two['deliveredPerSecond']:,.0f} delivered/s, last result after {two['lastResultSeconds']} s{complete(apns2)} | | two / one = **{ratio:.2f}×** |")
try:
    rss = dict(line.split() for line in open(os.path.join(out, "broadcast.rss")) if line.strip())
    lines.append("")
    lines.append("Peak RSS of each process during the broadcast (VmHWM, reset just before it):")
    lines.append("")
    lines.append("| process | peak RSS |")
    lines.append("|---|---:|")
    names = {"kafka": "pushhub kafka-dev (the embedded cluster)", "sim": "pushhub sim", "ingress": "pushhub-ingress", "dispatcher": "pushhub-dispatcher"}
    for name in ["kafka", "sim", "ingress", "dispatcher", "apns-worker", "fcm-worker", "wns-worker", "webpush-worker"]:
        if name in rss:
            lines.append(f"| {names.get(name, 'pushhub-' + name)} | {int(rss[name]) // 1024} MB |")
except OSError:
    pass
def cpu(name):
    try:
        return {k: float(v) for k, v in (line.split() for line in open(os.path.join(out, name + ".cpu")) if line.strip())}
    except (OSError, ValueError):
        return {}
runs = [(n, t) for n, t in [("broadcast", "template broadcast"), ("send", f"sends at {rate:,}/s"), ("apns-1", "APNs broadcast, 1 worker"), ("apns-2", "APNs broadcast, 2 workers")] if cpu(n)]
if runs:
    order = ["kafka", "sim", "ingress", "dispatcher", "apns-worker", "apns-worker-2", "fcm-worker", "wns-worker", "webpush-worker", "pushhub-load"]
    lines.append("")
    lines.append("CPU seconds each process spent during each run (user + system; two cores give at most 2 s per second):")
    lines.append("")
    lines.append("| process | " + " | ".join(t for _, t in runs) + " |")
    lines.append("|---|" + "---:|" * len(runs))
    for process in order:
        if any(process in cpu(n) for n, _ in runs):
            lines.append(f"| {process} | " + " | ".join(f"{cpu(n).get(process, 0):.1f}" for n, _ in runs) + " |")
    seconds = {n: (report(n) or {}).get("seconds") for n, _ in runs}
    lines.append("| (run's wall-clock seconds) | " + " | ".join(f"{seconds[n]:.1f}" if seconds[n] else "—" for n, _ in runs) + " |")
# CPU-µs per delivery: each process's CPU over the deliveries it took part in. In the template
# broadcast a worker's deliveries are its platform's share of the devices.
shares = {"apns-worker": 0.60, "fcm-worker": 0.30, "wns-worker": 0.05, "webpush-worker": 0.05}
targets = {"apns-worker": 20, "fcm-worker": 25, "wns-worker": 25, "webpush-worker": 150, "dispatcher": 4, "ingress": 3, "sim": 15}
def deliveries(name):
    r = (report(name) or {}).get("results") or {}
    return r.get("received") or r.get("expected")
if runs:
    lines.append("")
    lines.append("CPU-µs per delivery, by process (its CPU seconds over the deliveries it took part in; in the template broadcast and the sends a worker's "
                 "are its platform's share of the devices; the sum leaves out the load generator):")
    lines.append("")
    lines.append("| process | " + " | ".join(t for _, t in runs) + " | target |")
    lines.append("|---|" + "---:|" * len(runs) + "---|")
    def per(process, name):
        count = deliveries(name)
        seconds = cpu(name).get(process)
        if not count or seconds is None:
            return None
        if name in ("broadcast", "send") and process in shares:
            count *= shares[process]
        return seconds * 1e6 / count
    for process in order:
        if process == "pushhub-load" or not any(process in cpu(n) for n, _ in runs):
            continue
        cells = [per(process, n) for n, _ in runs]
        target = targets.get(process)
        lines.append(f"| {process} | " + " | ".join("—" if c is None or c < 0.05 else f"{c:,.1f}" for c in cells) + f" | {'≤ ' + str(target) if target else ''} |")
    sums = []
    for n, _ in runs:
        count = deliveries(n)
        sums.append(sum(v for k, v in cpu(n).items() if k != "pushhub-load") * 1e6 / count if count else None)
    lines.append("| **all of PushHub, Kafka and the simulator** | " + " | ".join("—" if c is None else f"**{c:,.0f}**" for c in sums) + " | ≤ 400 a single-user send |")
for name, title in [("profile-dso.txt", "by library"), ("profile-symbols.txt", "by function")]:
    try:
        profile = [l.rstrip() for l in open(os.path.join(out, name)) if l.strip()]
    except OSError:
        continue
    if profile:
        lines.append("")
        lines.append(f"Where the APNs worker's time went under load (`perf record -g`, CPU-clock samples at 999 Hz), {title}:")
        lines.append("")
        lines.append("```")
        lines.extend(l[:160] for l in profile[:15])
        lines.append("```")
table = "\n".join(lines)

write_section("load-benchmark", "PushHub under load (`make bench-load`)", table)
