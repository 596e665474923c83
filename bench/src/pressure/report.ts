import type { PhaseResult } from "./phases.js";

/** One system's phases in a pressure run. */
export interface SystemResult {
  id: string;
  label: string;
  variant: string;
  describe: string;
  phases: PhaseResult[];
}

/** What results/pressure.json holds. */
export interface PressureRun {
  date: string;
  rate: number;
  workMs: number;
  concurrency: number;
  warmupS: number;
  phaseS: number;
  recoveryS: number;
  windowS: number;
  autovacuum: string;
  systems: SystemResult[];
  targets: TargetCheck[];
}

/** One target of issue 33 point 6, for @forge/jobs, with the figure that decides it. */
export interface TargetCheck {
  target: string;
  figure: string;
  met: boolean;
}

const RECOVERY_LIMIT_S = 120;

function phase(s: SystemResult | undefined, name: PhaseResult["phase"]): PhaseResult | undefined {
  return s?.phases.find((p) => p.phase === name);
}

const dead = (p: PhaseResult | undefined) => p?.tables.reduce((n, t) => n + t.deadTuples, 0) ?? NaN;
const fmt = (v: number | null | undefined, digits = 0) =>
  v === null || v === undefined || Number.isNaN(v) ? "-" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
/** kB under a megabyte, MB above. */
export function bytes(n: number): string {
  return n < 1024 * 1024 ? `${fmt(n / 1024)} kB` : `${fmt(n / 1024 / 1024, 1)} MB`;
}

/** The targets of point 6 for @forge/jobs, decided on this run's figures. */
export function checkTargets(systems: SystemResult[], rate: number): TargetCheck[] {
  const ours = systems.find((s) => s.id === "forge");
  const peers = systems.filter((s) => s.id !== "forge");
  if (!ours) return [];
  const checks: TargetCheck[] = [];
  for (const key of ["idle-xid", "readers"] as const) {
    const p = phase(ours, key);
    const ratio = p ? p.donePerSMedian / rate : NaN;
    checks.push({
      target: `completions ≥ 0.98× offered through ${key === "idle-xid" ? "(a)" : "(b)"}`,
      figure: `median ${fmt(p?.donePerSMedian)}/s, lowest ${fmt(p?.donePerSLowest)}/s: ${fmt(ratio, 2)}×`,
      met: ratio >= 0.98,
    });
  }
  const clean = phase(ours, "clean");
  const a = phase(ours, "idle-xid");
  const p99Ratio = (a?.pickupP99 ?? NaN) / (clean?.pickupP99 ?? NaN);
  checks.push({
    target: "pickup p99 in (a) ≤ 2× the clean phase",
    figure: `${fmt(a?.pickupP99, 1)} ms vs ${fmt(clean?.pickupP99, 1)} ms: ${fmt(p99Ratio, 2)}×`,
    met: p99Ratio <= 2,
  });
  for (const key of ["idle-xid", "readers", "high-load"] as const) {
    const r = phase(ours, `recovery after ${key}`);
    const after = r?.under2xCleanAfterS;
    checks.push({
      target: `queue table back under 2× its clean size within 2 min of recovery after ${key}`,
      figure:
        after === null || after === undefined
          ? `not within the ${fmt(r?.seconds)} s recovery (${bytes(r?.liveBytes ?? 0)} vs ${bytes(clean?.liveBytes ?? 0)} clean)`
          : `after ${after} s (${bytes(r!.liveBytes)} at the end vs ${bytes(clean?.liveBytes ?? 0)} clean)`,
      met: after !== null && after !== undefined && after <= RECOVERY_LIMIT_S,
    });
  }
  const peerA = peers.map((s) => ({ s, p: phase(s, "idle-xid") }));
  checks.push({
    target: "fewer dead tuples than both peers at the end of (a)",
    figure: [`ours ${fmt(dead(a))}`, ...peerA.map(({ s, p }) => `${s.label} ${fmt(dead(p))}`)].join(", "),
    met: peerA.length > 0 && peerA.every(({ p }) => dead(a) < dead(p)),
  });
  checks.push({
    target: "lower pickup p99 than both peers in (a)",
    figure: [`ours ${fmt(a?.pickupP99, 1)} ms`, ...peerA.map(({ s, p }) => `${s.label} ${fmt(p?.pickupP99, 1)} ms`)].join(", "),
    met: peerA.length > 0 && peerA.every(({ p }) => (a?.pickupP99 ?? Infinity) < (p?.pickupP99 ?? -Infinity)),
  });
  return checks;
}

/** Which targets a row of ours decides, for the per-phase table's last column. */
function rowTargets(s: SystemResult, p: PhaseResult, checks: TargetCheck[]): string {
  if (s.id !== "forge") return "";
  const mine = checks.filter((c) =>
    p.phase === "idle-xid"
      ? c.target.includes("(a)")
      : p.phase === "readers"
        ? c.target.includes("(b)")
        : p.phase.startsWith("recovery")
          ? c.target.endsWith(p.phase.slice("recovery after ".length))
          : false,
  );
  return mine.map((c) => `${c.target}: ${c.met ? "met" : "**not met**"}`).join("; ");
}

/** The per-phase table, the targets and each table's dead tuples and size, as markdown. */
export function renderPressure(run: PressureRun): string {
  const lines: string[] = [];
  lines.push(
    `Offered ${fmt(run.rate)} jobs/s (1.5× in (c)), ${run.workMs} ms handlers, concurrency ${run.concurrency}; warm-up ${run.warmupS} s, phases ${run.phaseS} s, recoveries ${run.recoveryS} s, ${run.windowS} s windows; ${run.autovacuum}. ${run.date}.`,
    "",
    "| system | phase | offered/s | enqueued/s | done/s median (lowest) | pickup p50 / p99 ms | backlog | dead tuples, all tables | size, all tables | queue table (× clean) | under 2× clean after | point 6 targets (ours) |",
    "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
  );
  for (const s of run.systems) {
    const clean = phase(s, "clean");
    for (const p of s.phases) {
      const total = p.tables.reduce((n, t) => n + t.bytes, 0);
      const vsClean = clean && clean.liveBytes > 0 ? ` (${fmt(p.liveBytes / clean.liveBytes, 1)}×)` : "";
      const under = p.under2xCleanAfterS === undefined ? "" : p.under2xCleanAfterS === null ? `not in ${p.seconds} s` : `${p.under2xCleanAfterS} s`;
      lines.push(
        `| ${s.label} | ${p.phase} | ${fmt(p.offeredPerS)} | ${fmt(p.enqueuedPerS)} | ${fmt(p.donePerSMedian)} (${fmt(p.donePerSLowest)}) | ${fmt(p.pickupP50, 1)} / ${fmt(p.pickupP99, 1)} | ${fmt(p.backlog)} | ${fmt(dead(p))} | ${bytes(total)} | ${bytes(p.liveBytes)}${vsClean} | ${under} | ${rowTargets(s, p, run.targets)} |`,
      );
    }
  }
  lines.push("", "| target (issue 33, point 6) | figure | |", "|---|---|---|");
  for (const c of run.targets) lines.push(`| ${c.target} | ${c.figure} | ${c.met ? "met" : "**not met**"} |`);
  lines.push("", "Dead tuples / total size of each table at each phase's end (tables under 64 kB with no dead tuples left out):", "");
  for (const s of run.systems) {
    const names = [...new Set(s.phases.flatMap((p) => p.tables.filter((t) => t.bytes >= 65536 || t.deadTuples > 0).map((t) => t.table)))];
    if (!names.length) continue;
    lines.push(`| ${s.label} | ${s.phases.map((p) => p.phase).join(" | ")} |`, `|---|${s.phases.map(() => "--:").join("|")}|`);
    for (const name of names) {
      const cells = s.phases.map((p) => {
        const t = p.tables.find((x) => x.table === name);
        return t ? `${fmt(t.deadTuples)} / ${bytes(t.bytes)}` : "-";
      });
      lines.push(`| ${name} | ${cells.join(" | ")} |`);
    }
    lines.push("");
  }
  for (const s of run.systems) lines.push(`- ${s.label}: ${s.describe}.`);
  return lines.join("\n") + "\n";
}
