import { describeDialect } from '../testing/dialect-suite.js';
import { AI_SDK_REFUSALS, AI_SDK_STREAMS } from '../testing/dialect-streams.js';

describeDialect('ai-sdk', AI_SDK_STREAMS, AI_SDK_REFUSALS);
