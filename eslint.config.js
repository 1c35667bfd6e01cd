// ESLint for what the type checker does not catch: promises nobody awaits
// (a failure lost without a trace), and empty catch blocks and `.catch(() => {})`
// with no word on why (scripts/lint/no-silent-catch.js).
// Layering (who may import whom) is dependency-cruiser's job: .dependency-cruiser.cjs.
import reactHooks from 'eslint-plugin-react-hooks';
import tseslint from 'typescript-eslint';
import noSilentCatch from './scripts/lint/no-silent-catch.js';

export default tseslint.config(
  { ignores: ['dist/**', 'test-results/**', 'node_modules/**', 'vm-images/**', '**/*.cjs', '**/*.mjs', '**/*.js'] },
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        // One program per process, as the type checks use them.
        project: ['./tsconfig.electron.json', './tsconfig.renderer.json', './tsconfig.preload.json', './tsconfig.test.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { '@typescript-eslint': tseslint.plugin, 'react-hooks': reactHooks, factory: { rules: { 'no-silent-catch': noSilentCatch } } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { attributes: false } }],
      // An empty catch must say why the error may be dropped (a comment inside it).
      'no-empty': ['error', { allowEmptyCatch: false }],
      'factory/no-silent-catch': 'error',
      'react-hooks/rules-of-hooks': 'error',
      'react-hooks/exhaustive-deps': 'error',
    },
  },
  {
    // Being edited by others as the rule came in; each has a .catch that needs its reason. Remove once it has.
    files: ['test/soak/soak-run.ts'],
    rules: { 'factory/no-silent-catch': 'off' },
  },
);
