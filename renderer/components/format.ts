export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m} m ${Math.round(s - m * 60)} s`;
}

/** Token counts for a card: "1.2k in · 340 out". */
export function formatTokens(tokens: { input: number; output: number } | undefined): string {
  if (!tokens) return '';
  return `${compactCount(tokens.input)} in · ${compactCount(tokens.output)} out`;
}

function compactCount(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '?';
  if (n < 1000) return String(Math.round(n));
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/** Agent cost in US dollars: cents precision above a dollar, four decimals below. */
export function formatCost(usd: number | undefined): string {
  if (usd === undefined || !Number.isFinite(usd) || usd < 0) return '';
  return usd >= 1 ? `$${usd.toFixed(2)}` : `$${usd.toFixed(4)}`;
}

/** Guest memory (settings count it in MiB) for people, in binary units like every size the app shows: "512 MiB", "4 GiB", "1.5 GiB". */
export function formatMemory(mb: number): string {
  if (!Number.isFinite(mb) || mb < 0) return '?';
  if (mb < 1024) return `${Math.round(mb)} MiB`;
  const gb = mb / 1024;
  return `${Number.isInteger(gb) ? gb : gb.toFixed(1)} GiB`;
}

/** Bytes for people, in binary units: "612 MiB", "1.5 GiB" (never a raw byte count). */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '?';
  const mib = bytes / 2 ** 20;
  if (mib < 1) return `${Math.max(0, Math.round(bytes / 1024))} KiB`;
  if (mib < 1024) return `${Math.round(mib)} MiB`;
  const gib = mib / 1024;
  return `${gib < 10 ? gib.toFixed(1) : Math.round(gib)} GiB`;
}

/** A CPU share as `top` counts it (100 = one core busy). */
export function formatPercent(p: number): string {
  if (!Number.isFinite(p) || p < 0) return '?';
  return `${Math.round(p)}%`;
}
