// The soak's report: the JSON as it is, a one-page summary for people, and the
// app's memory over time as a small SVG, written next to each other.
import fs from 'node:fs';
import path from 'node:path';
import type { SoakReport } from './soak-run.js';

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** RSS over time, one polyline per app process (a restart starts a new one). */
export function memorySvg(report: SoakReport): string {
  const W = 640;
  const H = 240;
  const pad = { l: 48, r: 12, t: 24, b: 32 };
  const s = report.memory.samples;
  const tMax = Math.max(1, ...s.map((x) => x.t));
  const mMax = Math.max(1, ...s.map((x) => x.rssMb)) * 1.1;
  const x = (t: number) => pad.l + (t / tMax) * (W - pad.l - pad.r);
  const y = (m: number) => H - pad.b - (m / mMax) * (H - pad.t - pad.b);
  const lives = [...new Set(s.map((p) => p.life))];
  const colors = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2'];
  const lines = lives.map((l, i) => {
    const pts = s.filter((p) => p.life === l).map((p) => `${x(p.t).toFixed(1)},${y(p.rssMb).toFixed(1)}`).join(' ');
    return `<polyline fill="none" stroke="${colors[i % colors.length]}" stroke-width="1.5" points="${pts}"><title>app process ${l}</title></polyline>`;
  });
  const ticks = [0, 0.5, 1].map((f) => {
    const m = mMax * f;
    return `<text x="${pad.l - 6}" y="${y(m) + 4}" text-anchor="end" font-size="10">${Math.round(m)}</text><line x1="${pad.l}" x2="${W - pad.r}" y1="${y(m)}" y2="${y(m)}" stroke="#ddd"/>`;
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${pad.l}" y="14" font-size="12">${esc(`App RSS (MiB) over the soak, seed ${report.seed}; one line per app process (${lives.length})`)}</text>`,
    ...ticks,
    `<text x="${W - pad.r}" y="${H - 8}" text-anchor="end" font-size="10">${Math.round(tMax)} s</text>`,
    `<text x="${pad.l}" y="${H - 8}" font-size="10">0 s</text>`,
    ...lines,
    '</svg>',
  ].join('\n');
}

export function summaryText(report: SoakReport): string {
  const kv = (o: Record<string, number>) => Object.entries(o).sort().map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
  const lines = [
    `# Soak report, seed ${report.seed}`,
    '',
    `Replay: \`npm run soak -- --profile ${report.options.profile ?? 'medium'} --seed ${report.seed} --tasks ${report.options.tasks}\``,
    `Started ${report.startedAt}, ran ${report.durationSec} s; ${report.options.tasks} tasks over ${report.options.repos} repositories, parallel ${report.options.parallel}, ${report.quickSandboxes} quick sandboxes, ${report.hookSessions ?? 0} hooks sessions, ${report.appRestarts} app restarts.`,
    '',
    `- Tasks by outcome: ${kv(report.tasksByOutcome)}`,
    `- User actions: ${kv(report.actions)}`,
    `- Faults injected: ${kv(report.faultsInjected)}`,
    `- Faults whose moment never came: ${kv(report.faultsMissed)}`,
    `- Invariants checked: ${report.invariantsChecked}; broken: ${report.invariantsBroken.length}`,
    `- Leftover files: ${report.leftovers.length}; leftover processes: ${report.leftoverProcesses.length}; credential hits in the data folder: ${report.credentialHits.length}`,
    `- Memory: ${report.memory.verdict} (bound: ${report.memory.bound})`,
    `- Timers, handles and listeners: ${report.resources?.verdict || 'not sampled'}${report.resources?.bound ? ` (bound: ${report.resources.bound})` : ''}`,
    `- Data folder: ${(report.disk.baselineBytes / 1048576).toFixed(1)} MiB at start, ${(report.disk.endBytes / 1048576).toFixed(1)} MiB at the end, of which kept logs ${(report.disk.keptLogBytes / 1048576).toFixed(1)} MiB`,
    '',
  ];
  if (report.invariantsBroken.length) {
    lines.push('## Broken invariants', '');
    for (const b of report.invariantsBroken.slice(0, 30)) lines.push(`- ${b.invariant} — at ${b.at}: ${b.detail.slice(0, 400)}`);
    lines.push('');
  }
  lines.push('## Not injected, and why', '');
  for (const [k, v] of Object.entries(report.faultsNotInjected)) lines.push(`- ${k}: ${v}`);
  if (report.notes.length) lines.push('', '## Notes', '', ...report.notes.map((n) => `- ${n}`));
  lines.push('', 'Memory over time: memory.svg', '');
  return lines.join('\n');
}

/** Writes report.json, summary.md and memory.svg into dir; returns their paths. */
export function writeReport(report: SoakReport, dir: string): { json: string; summary: string; svg: string } {
  fs.mkdirSync(dir, { recursive: true });
  const out = { json: path.join(dir, 'report.json'), summary: path.join(dir, 'summary.md'), svg: path.join(dir, 'memory.svg') };
  fs.writeFileSync(out.json, JSON.stringify(report, null, 2) + '\n');
  fs.writeFileSync(out.summary, summaryText(report));
  fs.writeFileSync(out.svg, memorySvg(report) + '\n');
  return out;
}
