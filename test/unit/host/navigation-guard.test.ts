// The app window may only ever show its own page. A page inside it (or a frame in
// that page) that tries to go elsewhere, by link, script, form, redirect, dropped
// file or webview, is stopped. The guard is a pure function; hardenContents is
// checked against a recording WebContents, since no Electron runtime exists here.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { hardenContents, mayNavigate, type NavigationEventLike, type WebContentsLike } from '../../../main/host/electron/navigation-guard.js';

const page = '/opt/factory/resources/app.asar/dist/renderer/index.html';
const own = 'file:///opt/factory/resources/app.asar/dist/renderer/index.html';

const elsewhere = [
  undefined,
  '',
  'https://evil.example/',
  'http://127.0.0.1:41234/?token=x',
  'http://localhost/index.html',
  'ws://127.0.0.1:1/',
  'javascript:alert(1)',
  'data:text/html,<script>alert(1)</script>',
  'blob:file:///0b1c',
  'about:blank',
  'about:srcdoc',
  'devtools://devtools/bundled/inspector.html',
  'chrome://settings',
  'view-source:' + own,
  'file:///etc/passwd',
  'file:///home/me/repo/README.html',
  'file:///opt/factory/resources/app.asar/dist/renderer/other.html',
  'file:///opt/factory/resources/app.asar/dist/renderer/index.html/',
  'file:///opt/factory/resources/app.asar/dist/renderer%2Findex.html',
  'file://evil.example/opt/factory/resources/app.asar/dist/renderer/index.html',
  'file:///opt/factory/resources/app.asar/dist/renderer/../../../../../tmp/index.html',
  'file:///opt/factory/resources/app.asar/dist/renderer/index.html%00.png',
  'file:///opt/factory/resources/app.asar/dist/renderer/index.htm',
];

describe('the navigation guard', () => {
  it('lets a frame stay on the app page (reload, query or hash)', () => {
    for (const url of [own, own + '?x=1', own + '#review', 'file://localhost/opt/factory/resources/app.asar/dist/renderer/index.html']) {
      expect(mayNavigate(url, page), url).toBe(true);
    }
  });

  it('refuses every other page, scheme, file and host', () => {
    for (const url of elsewhere) expect(mayNavigate(url, page), String(url)).toBe(false);
  });
});

class RecordingContents extends EventEmitter {
  windowOpen: (() => { action: string }) | undefined;
  setWindowOpenHandler(handler: () => { action: 'deny' }): void {
    this.windowOpen = handler;
  }
  /** Fires an event as Electron would and says whether a handler prevented it. */
  fire(event: string, url = ''): boolean {
    let prevented = false;
    const e: NavigationEventLike = { url, preventDefault: () => void (prevented = true) };
    this.emit(event, e);
    return prevented;
  }
}

describe('hardenContents', () => {
  const contents = new RecordingContents();
  hardenContents(contents as WebContentsLike, page);

  it('stops any frame, the main frame or a subframe, from navigating away from the app page', () => {
    for (const event of ['will-frame-navigate', 'will-navigate', 'will-redirect']) {
      for (const url of elsewhere) expect(contents.fire(event, url as string), `${event} ${url}`).toBe(true);
      expect(contents.fire(event, own + '#tab'), `${event} own page`).toBe(false);
    }
  });

  it('refuses webviews and new windows', () => {
    expect(contents.fire('will-attach-webview')).toBe(true);
    expect(contents.windowOpen?.()).toEqual({ action: 'deny' });
  });
});
