// The review of a result that came back from a sandbox: what the quarantine
// verified and what the user approves. Everything here describes untrusted
// content, so it is complete (no silent caps), and whatever could not be shown
// is said in `confirmations`, which Approve requires the user to acknowledge.
// Pure TypeScript: no Node, no DOM.
import { z } from 'zod';

/** What a path is on one side of the diff ('none' when it does not exist there). */
export const FileMode = z.enum(['file', 'executable', 'symlink', 'submodule', 'none']);
export type FileMode = z.infer<typeof FileMode>;

/** Why the review cannot show a file's new content as text. */
export const NotTextReason = z.enum(['nul-byte', 'invalid-utf8', 'too-large']);
export type NotTextReason = z.infer<typeof NotTextReason>;

export const DiffFile = z.object({
  /** The path as stored in git (may hold any byte but NUL); show it through escapeName(). */
  path: z.string(),
  oldPath: z.string().optional(),
  status: z.enum(['added', 'modified', 'deleted', 'renamed', 'copied', 'type-changed', 'other']),
  added: z.number(),
  removed: z.number(),
  /** git's own verdict (numstat "-"); kept for compatibility, `notText` is the one to show. */
  binary: z.boolean(),
  oldMode: FileMode.optional(),
  newMode: FileMode.optional(),
  /** Size in bytes of the new content (0 when deleted). */
  size: z.number().optional(),
  /** Set when the new content cannot be shown as text; the UI flags it with its size. */
  notText: NotTextReason.optional(),
  /** The symlink's target (new side), as stored. */
  linkTarget: z.string().optional(),
});
export type DiffFile = z.infer<typeof DiffFile>;

export const ReviewFlagKind = z.enum([
  /** A symlink was added or changed (message names the target, and whether it leaves the repository). */
  'symlink',
  /** A submodule (gitlink) was added or changed, or .gitmodules changed (message names the URL; ext:: and file:: called out). */
  'submodule',
  /** .gitattributes, .gitconfig-like files, .lfsconfig: they change what git does on the host. */
  'git-config',
  /** The executable bit was set or cleared. */
  'exec-bit',
  /** A file that runs code on the host or in CI later: .github/workflows, .factory/, .claude/, hooks, .husky, .vscode tasks, .envrc, ... */
  'runs-code',
  /** Content the review cannot show as text (NUL bytes, invalid UTF-8, too large). */
  'not-text',
  /** A path with control characters, bidi overrides, newlines, invisible characters or trailing spaces. */
  'unsafe-name',
  /** Bidi overrides or invisible characters inside added lines (the Trojan Source class). */
  'hidden-chars',
  /** A credential pattern or the value of a credential the sandbox used, in an added line. */
  'secret',
]);
export type ReviewFlagKind = z.infer<typeof ReviewFlagKind>;

export const ReviewFlag = z.object({
  kind: ReviewFlagKind,
  severity: z.enum(['warning', 'danger']),
  path: z.string(),
  /** 1-based line in the new file, where the flag is about content. */
  line: z.number().optional(),
  /** What the user should know, in words; names inside it are already escaped. */
  message: z.string(),
});
export type ReviewFlag = z.infer<typeof ReviewFlag>;

export const SecretFinding = z.object({
  path: z.string(),
  /** 1-based line in the new file. */
  line: z.number(),
  /** The rule that matched (a rule set's id, or 'credential:<id>' for a value the sandbox used). */
  rule: z.string(),
  /** The matched text with the value masked (never the value itself). */
  masked: z.string(),
  /** Set when the secret is in this agent commit's message (then `line` is the message's line, `path` names the commit). */
  commit: z.string().optional(),
});
export type SecretFinding = z.infer<typeof SecretFinding>;

/** Something Approve needs a deliberate second step for, named in words. */
export const ReviewConfirmationKind = z.enum(['unshown', 'secrets']);
export type ReviewConfirmationKind = z.infer<typeof ReviewConfirmationKind>;
export const ReviewConfirmation = z.object({
  kind: ReviewConfirmationKind,
  /** E.g. "the patch of 3 files was not shown (over the 2 MiB cap): a, b, c". */
  message: z.string(),
});
export type ReviewConfirmation = z.infer<typeof ReviewConfirmation>;

/** One commit of the agent's history, as the agent wrote it (escape it to show). */
export const AgentCommit = z.object({
  id: z.string(),
  /** How many parents it has: two or more is a merge. */
  parents: z.number(),
  /** "Name <email>" of its author. */
  author: z.string(),
  /** The message, up to ReviewHistory.maxMessageChars characters. */
  message: z.string(),
  /** The message is longer than what `message` holds. */
  messageCut: z.boolean(),
  /** The message was longer than ReviewHistory.maxScanBytes: its rest was not scanned for secrets. */
  scannedInPart: z.boolean(),
});
export type AgentCommit = z.infer<typeof AgentCommit>;

/**
 * The agent's commits between the base and the head. None of them lands:
 * Approve makes one new commit with the head's tree on the base.
 */
export const ReviewHistory = z.object({
  /** Every commit reachable from the head and not from the base. */
  total: z.number(),
  /** How many of them are merges. */
  merges: z.number(),
  /** Newest first, the first maxCommits of them; their messages are scanned for secrets. */
  commits: z.array(AgentCommit),
  maxCommits: z.number(),
  maxMessageChars: z.number(),
  maxScanBytes: z.number(),
});
export type ReviewHistory = z.infer<typeof ReviewHistory>;

/** What came back from the sandbox, verified and held in quarantine until the user decides. */
export const PullbackReview = z.object({
  taskId: z.string(),
  branch: z.string(),
  baseCommit: z.string(),
  headCommit: z.string(),
  /** Every changed file (complete up to MAX_REVIEW_FILES; past it `filesOmitted` counts the rest). */
  files: z.array(DiffFile),
  filesOmitted: z.number().default(0),
  /** Totals over every changed file, listed or not. */
  added: z.number(),
  removed: z.number(),
  /** The unified patch, capped; `patchTruncated` says when the cap cut it (the cut files are in `confirmations`). */
  patch: z.string(),
  patchTruncated: z.boolean(),
  bundleBytes: z.number(),
  checks: z.array(z.object({ name: z.string(), ok: z.boolean(), message: z.string() })),
  /** Shown above the diff, most severe first. */
  flags: z.array(ReviewFlag).default([]),
  secrets: z.array(SecretFinding).default([]),
  /** Non-empty: Approve is a second, deliberate step that must name these kinds in tasks.approve's `confirm`. */
  confirmations: z.array(ReviewConfirmation).default([]),
  /** The agent's commits (absent in reviews written before Approve landed one commit of its own). */
  history: ReviewHistory.optional(),
});
export type PullbackReview = z.infer<typeof PullbackReview>;

/** One file of a review, on request: its own patch and its leading bytes, escaped. */
export const ReviewFileDetail = z.object({
  path: z.string(),
  size: z.number(),
  patch: z.string(),
  patchTruncated: z.boolean(),
  /** The first bytes of the new content (up to 512), printable ASCII as is, everything else escaped (\n, \t, \xNN). */
  leadingBytes: z.string(),
  /** Why leadingBytes is empty when it is (deleted file, submodule, content over the cap for opening one file). */
  note: z.string().optional(),
});
export type ReviewFileDetail = z.infer<typeof ReviewFileDetail>;

export const MAX_REVIEW_FILES = 200_000;
