// The parts of Electron the bridge wiring (bridge.ts, ipc.ts, dialogs.ts, tray.ts)
// uses, typed structurally and handed in by main.ts. So this wiring imports nothing
// from 'electron': it type-checks and is tested under plain Node, where no Electron
// runtime exists, and tsconfig.electron.json checks that the real parts fit.
// Method syntax on purpose: TypeScript compares method parameters bivariantly,
// which lets Electron's wider signatures (overloads, BaseWindow) fit these.

/** What a dialog's parent window needs (Electron's BaseWindow has it). */
export interface BaseWindowLike {
  isDestroyed(): boolean;
  isMinimized(): boolean;
  restore(): void;
  show(): void;
  focus(): void;
}

/** The app window (a BrowserWindow). */
export interface WindowLike extends BaseWindowLike {
  readonly webContents: { isDestroyed(): boolean; send(channel: string, ...args: any[]): void };
}

/** What an ipcMain.handle listener reads of its event (IpcMainInvokeEvent). */
export interface InvokeEventLike {
  readonly sender: unknown;
  readonly senderFrame: { readonly url: string } | null;
}

export interface MenuItemLike {
  label?: string;
  type?: 'normal' | 'separator' | 'submenu';
  enabled?: boolean;
  submenu?: MenuItemLike[];
  click?(): unknown;
}

/** A desktop notification (Electron's Notification). */
export interface NotificationLike {
  show(): void;
  on(event: 'click', listener: () => void): unknown;
}

export interface TrayLike {
  setToolTip(toolTip: string): void;
  setContextMenu(menu: any): void;
  on(event: 'click', listener: () => void): unknown;
  destroy(): void;
}

export interface ElectronParts {
  ipcMain: {
    handle(channel: string, listener: (event: InvokeEventLike, ...args: any[]) => unknown): void;
    removeHandler(channel: string): void;
  };
  dialog: {
    showOpenDialog(
      window: BaseWindowLike,
      options: { title?: string; buttonLabel?: string; properties?: Array<'openDirectory'> },
    ): Promise<{ canceled: boolean; filePaths: string[] }>;
  };
  Menu: { buildFromTemplate(template: MenuItemLike[]): unknown };
  Tray: new (image: any) => TrayLike;
  nativeImage: { createFromBuffer(buffer: Buffer): unknown };
  /** Desktop notifications; absent where the host has none to give. */
  Notification?: { new (options: { title: string; body: string }): NotificationLike; isSupported(): boolean };
}
