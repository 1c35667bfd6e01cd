import { createContext, useContext } from 'react';
import { useStore } from 'zustand';
import type { FactoryController } from './controller.js';
import type { FactoryState } from './store.js';

export const ControllerContext = createContext<FactoryController | null>(null);

export function useController(): FactoryController {
  const c = useContext(ControllerContext);
  if (!c) throw new Error('useController outside <ControllerContext.Provider>');
  return c;
}

export function useFactory<T>(selector: (s: FactoryState) => T): T {
  return useStore(useController().store, selector);
}
