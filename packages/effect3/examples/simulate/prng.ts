/**
 * The simulator's only source of randomness: a small seeded generator (sfc32, seeded through splitmix32)
 * that draws synchronously, so one run of thousands of events needs no Effect runtime, and that can also
 * be handed to the library's schedules as an Effect `Random` service.
 */
import { Chunk, Effect, Random } from "effect"

const TWO_POW_32 = 4294967296

/** A source of uniform draws in `[0, 1)`: the generator, or a fixed list of draws in tests. */
export interface Uniform {
  next(): number
}

/** A seeded pseudo-random generator with synchronous draws. */
export class Prng implements Uniform {
  private a: number
  private b: number
  private c: number
  private d: number
  private spare = NaN

  constructor(seed: number) {
    // splitmix32 spreads one 32-bit seed over sfc32's 128 bits of state
    let s = seed >>> 0
    const split = () => {
      s = (s + 0x9e3779b9) >>> 0
      let z = s
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
      return (z ^ (z >>> 16)) >>> 0
    }
    this.a = split()
    this.b = split()
    this.c = split()
    this.d = 1
    for (let i = 0; i < 12; i++) this.uint32()
  }

  /** 32 uniformly random bits as an unsigned integer. */
  uint32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0
    this.d = (this.d + 1) | 0
    this.a = this.b ^ (this.b >>> 9)
    this.b = (this.c + (this.c << 3)) | 0
    this.c = (this.c << 21) | (this.c >>> 11)
    this.c = (this.c + t) | 0
    return t >>> 0
  }

  /** Uniform in `[0, 1)`, like `Random.next`. */
  next(): number {
    return this.uint32() / TWO_POW_32
  }

  /** A standard normal draw (Marsaglia's polar method; the pair's second value is kept for the next call). */
  normal(): number {
    if (!Number.isNaN(this.spare)) {
      const z = this.spare
      this.spare = NaN
      return z
    }
    for (;;) {
      const u = 2 * this.next() - 1
      const v = 2 * this.next() - 1
      const s = u * u + v * v
      if (s > 0 && s < 1) {
        const f = Math.sqrt(-2 * Math.log(s) / s)
        this.spare = v * f
        return u * f
      }
    }
  }
}

/** FNV-1a over the parts' text, then a final mix: the same parts always give the same 32-bit seed. */
export const seedFrom = (...parts: ReadonlyArray<string | number>): number => {
  let h = 0x811c9dc5
  const text = parts.join("\u0000")
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

/** Draws as an Effect `Random` service: `Random.next` consumes exactly one `prng.next()`. */
export const toRandom = (prng: Uniform): Random.Random => {
  const nextIntBetween = (min: number, max: number) => Effect.sync(() => min + Math.floor(prng.next() * (max - min)))
  return {
    [Random.RandomTypeId]: Random.RandomTypeId,
    next: Effect.sync(() => prng.next()),
    nextBoolean: Effect.sync(() => prng.next() > 0.5),
    nextInt: Effect.sync(() => Math.floor(prng.next() * Number.MAX_SAFE_INTEGER)),
    nextRange: (min, max) => Effect.sync(() => min + prng.next() * (max - min)),
    nextIntBetween,
    shuffle: <A>(elements: Iterable<A>) =>
      Effect.sync(() => {
        const out = Array.from(elements)
        for (let i = out.length - 1; i > 0; i--) {
          const j = Math.floor(prng.next() * (i + 1))
          const tmp = out[i]!
          out[i] = out[j]!
          out[j] = tmp
        }
        return Chunk.fromIterable(out)
      })
  }
}
