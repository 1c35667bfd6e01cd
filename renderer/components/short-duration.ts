// A board cell's duration: at most four characters, so seven stage columns fit at 1280 px.

/** A duration in at most four characters for a board cell: "850ms" → "0.9s", "12s", "3m", "2h". */
export function shortDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '';
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(1)}s`;
  if (s < 60) return `${Math.round(s)}s`;
  if (s < 3600) return `${Math.round(s / 60)}m`;
  return `${Math.round(s / 3600)}h`;
}
