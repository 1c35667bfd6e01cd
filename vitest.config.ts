import { defineConfig } from 'vitest/config';

// Tests mirror the environments (DESIGN.md): node for common/ and main/, jsdom
// for renderer components, real QEMU / keyring / git for integration, Chromium
// for end to end. Integration and e2e run one file at a time: each boots VMs on
// a 2-core machine. Their polls wait up to 15 s: under that load a browser can
// take more than the default second to paint what already arrived. The warm
// pool is off there (an app's waiting VM would count among a test's QEMU
// processes and take a core); test/integration/warm-pool.test.ts turns it on.
export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'], environment: 'node', testTimeout: 30_000 } },
      {
        test: {
          name: 'renderer',
          include: ['test/renderer/**/*.test.{ts,tsx}'],
          environment: 'jsdom',
          testTimeout: 30_000,
          setupFiles: ['test/renderer/support/jsdom-setup.ts'],
        },
        esbuild: { jsx: 'automatic' },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          environment: 'node',
          testTimeout: 600_000,
          hookTimeout: 600_000,
          fileParallelism: false,
          expect: { poll: { timeout: 15_000 } },
          env: { FACTORY_WARM_POOL: '0' },
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          environment: 'node',
          testTimeout: 900_000,
          hookTimeout: 900_000,
          fileParallelism: false,
          expect: { poll: { timeout: 15_000 } },
          env: { FACTORY_WARM_POOL: '0' },
        },
      },
    ],
  },
});
