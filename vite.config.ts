// Builds the renderer (renderer/) into dist/renderer with a relative base, so the
// same files load from file:// under Electron and from the web host. It lives
// here, not in renderer/, because it runs under Node and the renderer has none.
//
// `--mode e2e` builds the end-to-end tests' renderer instead: the same code plus
// the read-only test hook `window.__factoryTerminals`, into a folder of its own
// under test-results/ (electron-builder packages dist/**, so never there).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Where `vite build --mode e2e` puts the renderer the end-to-end tests serve. */
export const E2E_RENDERER_DIR = 'test-results/renderer-e2e';

export default defineConfig(({ mode }) => {
  const e2e = mode === 'e2e';
  return {
    root: path.join(here, 'renderer'),
    base: './',
    // Read by renderer/terminal/terminal-registry.ts; false lets the minifier drop the hook.
    define: { __FACTORY_E2E_HOOKS__: JSON.stringify(e2e) },
    build: {
      outDir: path.join(here, e2e ? E2E_RENDERER_DIR : 'dist/renderer'),
      emptyOutDir: true,
      sourcemap: true,
      // No inline scripts or eval: the CSP is script-src 'self'.
      modulePreload: { polyfill: false },
      assetsInlineLimit: 0,
      // React + xterm.js (with WebGL) in one chunk is expected for a local desktop app.
      chunkSizeWarningLimit: 2000,
    },
  };
});
