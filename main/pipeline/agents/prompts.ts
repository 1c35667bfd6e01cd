// Stage prompt templates: defaults here, overridable per repository by
// `.factory/prompts/<stage>.md` (or a stage's `prompt` in pipeline.json).
// Substitution is one pass over {{name}} with known names only: values are
// inserted as-is and never re-scanned, so a task text containing "{{...}}"
// cannot pull in other values or recurse.

export const PROMPT_STAGES = ['request', 'plan', 'build', 'test-repair', 'review', 'document'] as const;
export type PromptStage = (typeof PROMPT_STAGES)[number];

export const MAX_TEMPLATE_CHARS = 64 * 1024;
export const MAX_VALUE_CHARS = 256 * 1024;

/** The variables every template may use. */
export interface PromptVars {
  task: string;
  taskId: string;
  branch: string;
  baseRef: string;
  baseCommit: string;
  repoDir: string;
  taskFile: string;
  planFile: string;
  reviewFile: string;
  testCommand: string;
  /** Failure output of the test command (test-repair only), capped by the caller. */
  testOutput: string;
  /** Repair round, 1-based (test-repair only). */
  round: string;
  /** What happens to the plan and review files: kept outside the branch, or committed (commitScratchFiles). */
  scratchNote: string;
}

export const PROMPT_VAR_NAMES: ReadonlyArray<keyof PromptVars> = [
  'task', 'taskId', 'branch', 'baseRef', 'baseCommit', 'repoDir', 'taskFile', 'planFile', 'reviewFile', 'testCommand', 'testOutput', 'round', 'scratchNote',
];

/** scratchNote when the plan and review files stay out of the branch (the default). */
export const SCRATCH_KEPT_NOTE = 'a scratch file the app keeps for the user, outside the repository: do not git add it';
/** scratchNote when the repository's config asks for them in the branch. */
export const SCRATCH_COMMITTED_NOTE = 'this repository keeps it in its branch: git add it';

/** Where a repository overrides a stage's prompt. */
export function promptOverridePath(stage: PromptStage): string {
  return `.factory/prompts/${stage}.md`;
}

export const DEFAULT_PROMPTS: Record<PromptStage, string> = {
  request: `# Task {{taskId}}

{{task}}

Base: {{baseRef}} ({{baseCommit}}), branch {{branch}}.
`,
  plan: `You are working in the git repository at {{repoDir}} on branch {{branch}}.

The task is in {{taskFile}}:

---
{{task}}
---

Write an implementation plan to the file {{planFile}} ({{scratchNote}})
and change nothing else. Start the
file with a one-line summary of the approach, then list the files to change,
the steps, and how the change will be tested. Read the code you need first.
Finish with one short sentence saying what the plan is.
`,
  build: `You are working in the git repository at {{repoDir}} on branch {{branch}}.

Implement the task below, following the plan in {{planFile}}.

---
{{task}}
---

Keep to the plan's scope, add or update tests, and run them if you can
({{testCommand}}). Commit your work on the current branch with a clear message
(git add, git commit); do not switch branches or rewrite history.
Finish with one short sentence saying what you changed.
`,
  'test-repair': `You are working in the git repository at {{repoDir}} on branch {{branch}}.

The task was:

---
{{task}}
---

The test command \`{{testCommand}}\` failed (repair round {{round}}). Its output ends with:

\`\`\`
{{testOutput}}
\`\`\`

Find the cause and fix the code (or a wrong test, if the test is wrong), then
run \`{{testCommand}}\` again. Commit the fix on the current branch.
Finish with one short sentence saying what you fixed.
`,
  review: `You are reviewing a change in the git repository at {{repoDir}}.

The task was:

---
{{task}}
---

Review the diff of branch {{branch}} against the base commit {{baseCommit}}
(\`git diff {{baseCommit}}\`) for correctness, tests, security and scope.
Write your review to the file {{reviewFile}} ({{scratchNote}}):
findings first, most serious first, then a
last line that is exactly one of

Verdict: approve
Verdict: block

Use block only for problems that must be fixed before merging. Do not change
any other file. Finish with one short sentence giving the verdict and why.
`,
  document: `You are working in the git repository at {{repoDir}} on branch {{branch}}.

The change for this task is complete:

---
{{task}}
---

Update the documentation the change affects (README, docs, CHANGELOG if the
repository keeps one) to match \`git diff {{baseCommit}}\`. Change no code.
Commit on the current branch. If nothing needs documenting, change nothing.
Finish with one short sentence saying what you updated.
`,
};

export interface RenderedPrompt {
  text: string;
  /** {{names}} in the template that are not variables; left as they were. */
  unknown: string[];
}

/** Replaces {{name}} (optionally {{ name }}) with vars[name]; one pass, unknown names left in place. */
export function renderTemplate(template: string, vars: Partial<Record<string, string>>): RenderedPrompt {
  if (template.length > MAX_TEMPLATE_CHARS) {
    throw new Error(`prompt template is ${template.length} characters; the limit is ${MAX_TEMPLATE_CHARS}`);
  }
  const unknown = new Set<string>();
  const text = template.replace(/\{\{\s*([A-Za-z][A-Za-z0-9_-]{0,63})\s*\}\}/g, (whole, name: string) => {
    const value = Object.prototype.hasOwnProperty.call(vars, name) ? vars[name] : undefined;
    if (typeof value !== 'string') {
      unknown.add(name);
      return whole;
    }
    return value.length > MAX_VALUE_CHARS ? `${value.slice(0, MAX_VALUE_CHARS)}\n[… cut at ${MAX_VALUE_CHARS} characters]` : value;
  });
  return { text, unknown: [...unknown] };
}

/**
 * The prompt for a stage: the override when the repository has one (a
 * non-empty text), else the default; then rendered.
 */
export function stagePrompt(stage: PromptStage, vars: PromptVars, override?: string | null): RenderedPrompt {
  const template = override && override.trim() !== '' ? override : DEFAULT_PROMPTS[stage];
  return renderTemplate(template, vars as unknown as Record<string, string>);
}
