import { defineConfig } from "vitest/config"

// the core is plain TypeScript: its tests are plain vitest and fast-check, no service, socket or Effect
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // pure computation: a busy machine only makes these slower, so a cap a hang still hits instead of vitest's 5 s
    testTimeout: 30_000
  }
})
