import { describe, expect, it } from 'vitest';
import { DEFAULT_PROMPTS, PROMPT_STAGES, PROMPT_VAR_NAMES, promptOverridePath, renderTemplate, stagePrompt, type PromptVars } from '../../../main/pipeline/agents/prompts.js';
import { parseReviewVerdict } from '../../../main/pipeline/agents/review-verdict.js';

const vars: PromptVars = {
  task: 'Add a --verbose flag',
  taskId: 't-123',
  branch: 'factory/t-123',
  baseRef: 'main',
  baseCommit: 'a'.repeat(40),
  repoDir: '/work/repo',
  taskFile: '/work/TASK.md',
  planFile: 'PLAN.md',
  reviewFile: 'REVIEW.md',
  testCommand: 'npm test',
  testOutput: 'FAIL x.test.js',
  round: '1',
  scratchNote: 'kept out of the branch',
};

describe('prompt templates', () => {
  it('has a default for every stage that uses only known variables', () => {
    for (const stage of PROMPT_STAGES) {
      const r = stagePrompt(stage, vars);
      expect(r.unknown, stage).toEqual([]);
      expect(r.text, stage).not.toMatch(/\{\{/);
    }
    expect(stagePrompt('plan', vars).text).toContain('Add a --verbose flag');
    expect(stagePrompt('review', vars).text).toContain('Verdict: approve');
    expect(stagePrompt('test-repair', vars).text).toContain('FAIL x.test.js');
    expect(PROMPT_VAR_NAMES).toHaveLength(Object.keys(vars).length);
  });

  it('uses a repository override when it has text, else the default', () => {
    expect(promptOverridePath('test-repair')).toBe('.factory/prompts/test-repair.md');
    expect(stagePrompt('plan', vars, 'Plan {{ task }} on {{branch}}').text).toBe('Plan Add a --verbose flag on factory/t-123');
    expect(stagePrompt('plan', vars, '  \n').text).toBe(renderTemplate(DEFAULT_PROMPTS.plan, { ...vars }).text);
  });

  it('substitutes in one pass: values are never re-expanded', () => {
    const r = renderTemplate('A {{task}} B {{branch}}', { task: '{{branch}} $(rm -rf /) `x`', branch: 'b' });
    expect(r.text).toBe('A {{branch}} $(rm -rf /) `x` B b');
  });

  it('leaves unknown placeholders in place and reports them', () => {
    const r = renderTemplate('{{nope}} {{task}} {{ 1bad }} {{__proto__}} {{constructor}}', { task: 't' });
    expect(r.text).toBe('{{nope}} t {{ 1bad }} {{__proto__}} {{constructor}}');
    expect(r.unknown.sort()).toEqual(['constructor', 'nope']);
  });

  it('refuses an oversized template and caps an oversized value', () => {
    expect(() => renderTemplate('x'.repeat(70_000), {})).toThrow(/prompt template is 70000 characters; the limit is 65536/);
    const r = renderTemplate('{{testOutput}}', { testOutput: 'y'.repeat(300_000) });
    expect(r.text.length).toBeLessThan(270_000);
    expect(r.text).toMatch(/cut at 262144 characters\]$/);
  });
});

describe('review verdict', () => {
  it('reads plain and decorated verdict lines', () => {
    expect(parseReviewVerdict('# Review\n\nLooks fine.\n\nVerdict: approve\n').verdict).toBe('approve');
    expect(parseReviewVerdict('**Verdict:** Block\n').verdict).toBe('block');
    expect(parseReviewVerdict('## Verdict: APPROVED').verdict).toBe('approve');
    expect(parseReviewVerdict('> verdict : request-changes').verdict).toBe('block');
    expect(parseReviewVerdict('- **Verdict**: approve\r\n').verdict).toBe('approve');
  });

  it('takes the last verdict line', () => {
    const r = parseReviewVerdict('Verdict: approve\nOn second thought...\nVerdict: block\n');
    expect(r).toEqual({ verdict: 'block', line: 'Verdict: block' });
  });

  it('says when there is no verdict or an unknown word', () => {
    expect(parseReviewVerdict('All good, ship it.')).toEqual({ verdict: null, line: 'no "Verdict: approve" or "Verdict: block" line' });
    expect(parseReviewVerdict('The verdict is approve')).toMatchObject({ verdict: null });
    expect(parseReviewVerdict('Verdict: maybe')).toEqual({ verdict: null, line: 'unrecognised verdict "maybe" (expected approve or block)' });
  });
});
