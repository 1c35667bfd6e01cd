import { beforeAll } from 'vitest';

// jsdom lacks canvas and matchMedia, which xterm.js probes; answer as a browser
// without WebGL would. Loaded for every renderer test (vitest.config.ts).
HTMLCanvasElement.prototype.getContext = (() => null) as unknown as HTMLCanvasElement['getContext'];
window.matchMedia ??= ((query: string) => ({
  matches: false, media: query, onchange: null,
  addListener() {}, removeListener() {}, addEventListener() {}, removeEventListener() {}, dispatchEvent: () => false,
})) as unknown as typeof window.matchMedia;

// Files share one worker (isolate: false in vitest.config.ts): each starts, as a fresh browser
// profile would, with no storage another file left behind (a repository draft, a diff mode).
beforeAll(() => {
  localStorage.clear();
  sessionStorage.clear();
});
