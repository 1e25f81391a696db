/** Small numeric helpers the limit algorithms share. */

export const clamp = (n: number, min: number, max: number): number => Math.min(max, Math.max(min, n))

/** `max(1, floor(log10(n)))`: Vegas's thresholds grow slowly with the limit. */
export const log10Root = (n: number): number => Math.max(1, Math.floor(Math.log10(Math.max(1, n))))
