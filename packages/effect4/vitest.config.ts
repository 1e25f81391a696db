import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const src = fileURLToPath(new URL("src/", import.meta.url))
const core = fileURLToPath(new URL("../core/src/", import.meta.url))

/**
 * Integration tests are marked by their file name, `*.int.test.ts`: the files that need a service (PostgreSQL at
 * DATABASE_URL, Redis at REDIS_URL), start processes (a Redis Cluster, processes sharing a SQLite file), share
 * files between processes or open sockets (HTTP servers on 127.0.0.1). Every other test file is a unit test; test/support/unitGuard.ts fails a unit test that
 * opens a socket or starts a process, so a misnamed one is caught (the root's vitest.config.ts does the same for
 * the Effect 3 edition).
 */
const integration = ["test/**/*.int.test.ts"]

// `npm test` runs both projects, the unit tests first; `npm run test:unit` only the unit tests
export default defineConfig({
  // the examples import the library as users do, `effect-resilience/<Module>`: this package's src/ (as
  // tsconfig.json's paths map it for tsc, and scripts/tsResolve.mjs for node)
  resolve: {
    // test/contract is a link to packages/contract/suites: its imports resolve from here, this edition's
    preserveSymlinks: true,
    alias: [
      // the shared contract's adapter (test/edition/), as tsconfig.json's paths map it
      { find: /^#edition$/, replacement: fileURLToPath(new URL("test/edition/index.ts", import.meta.url)) },
      // the shared scenario vectors' format and loader, as tsconfig.json's paths map it
      { find: /^#vectors$/, replacement: fileURLToPath(new URL("../contract/vectors/format.ts", import.meta.url)) },
      { find: /^effect-resilience$/, replacement: `${src}index.ts` },
      { find: /^effect-resilience\/(.*)$/, replacement: `${src}$1.ts` },
      // the core's sources, as tsconfig.json's paths map them (a build resolves its package, node_modules/@effect-resilience/core)
      { find: /^@effect-resilience\/core\/(.*)$/, replacement: `${core}$1.ts` }
    ]
  },
  test: {
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: integration,
          setupFiles: ["test/support/unitGuard.ts"],
          sequence: { groupOrder: 0 },
          // TestClock time: a busy machine only makes these tests slower, so a cap a hang still hits instead of 5 s
          testTimeout: 30_000
        }
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: integration,
          // one file at a time, each in a fresh process
          pool: "forks",
          fileParallelism: false,
          sequence: { groupOrder: 1 },
          // real services and processes on a machine that may be busy: caps a hang still hits
          testTimeout: 60_000,
          hookTimeout: 60_000
        }
      }
    ]
  }
})
