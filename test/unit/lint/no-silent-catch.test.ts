// The lint rule that refuses a promise failure dropped without a reason
// (scripts/lint/no-silent-catch.js), run by ESLint's own RuleTester.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { RuleTester, type Rule } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, it } from 'vitest';

RuleTester.describe = describe;
RuleTester.it = it;
RuleTester.itOnly = it.only;

const file = path.resolve(__dirname, '../../../scripts/lint/no-silent-catch.js');
const rule = ((await import(pathToFileURL(file).href)) as { default: Rule.RuleModule }).default;

const tester = new RuleTester({ languageOptions: { parser: tseslint.parser } });
const silent = [{ messageId: 'silent' }];

tester.run('no-silent-catch', rule, {
  valid: [
    // A reason inside the handler, on the line, or on the line before.
    'p.catch(() => { /* the socket may be gone already */ });',
    'p.catch(() => undefined); // best effort: the next start reaps it',
    '// best effort: the next start reaps it\nawait p.catch(() => {});',
    // The value is used: the caller handles the missing one.
    'const st = await lstat(f).catch(() => undefined);',
    'queue = next.catch(() => undefined);',
    'return p.catch(() => null);',
    'p.catch(() => {}).then(run);',
    'Promise.all(hosts.map((h) => connect(h).catch(() => undefined)));',
    // The error is handled.
    'p.catch((err) => log.warn("failed", { err }));',
    'p.catch(() => false);',
  ],
  invalid: [
    { code: 'p.catch(() => {});', errors: silent },
    { code: 'await p.catch(() => undefined);', errors: silent },
    { code: 'void p.catch((_err) => {});', errors: silent },
    { code: 'p.catch(function () {});', errors: silent },
    { code: 'p.catch(() => void 0);', errors: silent },
    { code: 'await p?.close().catch(() => null);', errors: silent },
    { code: 'write(data, () => void ack().catch(() => {}));', errors: silent },
    // A comment two lines up is about something else.
    { code: '// the step above\nstep();\np.catch(() => {});', errors: silent },
  ],
});
