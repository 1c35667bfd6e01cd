// Which xterm.js renderer draws a terminal: WebGL where a GPU backs it, the
// DOM renderer otherwise (xterm.js 6 has no canvas renderer). Measured without a
// GPU, WebGL on a software rasteriser costs more CPU than the DOM renderer.
import type { Terminal } from '@xterm/xterm';
import { WebglAddon } from '@xterm/addon-webgl';

export type TerminalRendererKind = 'none' | 'webgl' | 'dom';

/**
 * Loads the WebGL renderer when wanted and available; reports the renderer in
 * use now and again when the GPU context is lost (then the DOM renderer draws).
 */
export function loadRenderer(term: Terminal, host: HTMLElement, wantWebgl: boolean, onRenderer: (kind: 'webgl' | 'dom') => void): WebglAddon | null {
  if (!wantWebgl || !webglAvailable(host.ownerDocument)) {
    onRenderer('dom');
    return null;
  }
  try {
    const webgl = new WebglAddon();
    webgl.onContextLoss(() => {
      // The GPU went away: drop to the DOM renderer rather than a blank pane.
      webgl.dispose();
      onRenderer('dom');
    });
    term.loadAddon(webgl);
    onRenderer('webgl');
    return webgl;
  } catch {
    onRenderer('dom');
    return null;
  }
}

/**
 * WebGL2 backed by a GPU. A software rasteriser (SwiftShader, llvmpipe: what
 * Chromium falls back to without a GPU) draws slower than the DOM renderer and
 * takes CPU from parsing, so it counts as unavailable.
 */
export function webglAvailable(doc: Document): boolean {
  try {
    const canvas = doc.createElement('canvas');
    const gl = canvas.getContext('webgl2');
    if (!gl) return false;
    const info = gl.getExtension('WEBGL_debug_renderer_info');
    const name = String(info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER));
    gl.getExtension('WEBGL_lose_context')?.loseContext();
    return !/swiftshader|llvmpipe|softpipe|software/i.test(name);
  } catch {
    return false;
  }
}
