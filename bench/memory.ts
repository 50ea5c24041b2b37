import v8 from 'node:v8';
import vm from 'node:vm';

export const mib = (n: number) => n / 2 ** 20;

let gcFn: (() => void) | null = null;
/** A full collection before each memory sample, so samples compare what is retained, not garbage not collected yet. */
export const fullGc = () => {
  if (!gcFn) {
    v8.setFlagsFromString('--expose_gc');
    gcFn = vm.runInNewContext('gc') as () => void;
  }
  gcFn();
};
