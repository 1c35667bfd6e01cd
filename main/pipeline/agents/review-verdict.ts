// The review stage's verdict, read from REVIEW.md (written by the agent, so
// untrusted): a line `Verdict: approve` or `Verdict: block`, tolerant of
// markdown decoration (`**Verdict:** Block`, `## Verdict: approve`). The last
// verdict line wins, since the prompt asks for it at the end; a file with no
// verdict, or one we cannot read, is reported as such rather than guessed.

export type ReviewVerdict = 'approve' | 'block';

export interface VerdictReading {
  verdict: ReviewVerdict | null;
  /** The verdict line as written (capped), or why there is none. */
  line: string;
}

export const MAX_REVIEW_BYTES = 1024 * 1024;

const VERDICT_LINE = /^[\s>#*_`-]*verdict[\s*_`]*[:：][\s*_`]*([A-Za-z-]+)/i;

const SYNONYMS: Record<string, ReviewVerdict> = {
  approve: 'approve',
  approved: 'approve',
  accept: 'approve',
  pass: 'approve',
  block: 'block',
  blocked: 'block',
  blocking: 'block',
  reject: 'block',
  'request-changes': 'block',
};

export function parseReviewVerdict(text: string): VerdictReading {
  if (text.length > MAX_REVIEW_BYTES) text = text.slice(-MAX_REVIEW_BYTES);
  let found: VerdictReading | null = null;
  for (const raw of text.split(/\r?\n/)) {
    const m = VERDICT_LINE.exec(raw);
    if (!m) continue;
    const word = m[1]!.toLowerCase();
    const line = raw.trim().slice(0, 200);
    const verdict = SYNONYMS[word];
    found = verdict ? { verdict, line } : { verdict: null, line: `unrecognised verdict "${m[1]!.slice(0, 40)}" (expected approve or block)` };
  }
  return found ?? { verdict: null, line: 'no "Verdict: approve" or "Verdict: block" line' };
}
