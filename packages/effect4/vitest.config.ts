import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // TestClock time: a busy machine only makes these tests slower, so a cap a hang still hits instead of 5 s
    testTimeout: 30_000
  }
})
