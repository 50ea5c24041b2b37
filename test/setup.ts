import { stopSharedService } from './support/service';
import { stopTestPostgres } from './support/pg';

/** Root hooks: the shared service and the test PostgreSQL are stopped once, after every file ran. */
export const mochaHooks = {
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await stopSharedService();
    await stopTestPostgres();
  },
};
