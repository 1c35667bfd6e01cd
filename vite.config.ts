// Builds the renderer (renderer/) into dist/renderer with a relative base, so the
// same files load from file:// under Electron and from the web host. It lives
// here, not in renderer/, because it runs under Node and the renderer has none.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

export default defineConfig({
  root: path.join(here, 'renderer'),
  base: './',
  build: {
    outDir: path.join(here, 'dist/renderer'),
    emptyOutDir: true,
    sourcemap: true,
    // No inline scripts or eval: the CSP is script-src 'self'.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    // React + xterm.js (with WebGL) in one chunk is expected for a local desktop app.
    chunkSizeWarningLimit: 2000,
  },
});
