// Notes the profilers hand back beside a profile: facts worth telling the
// user that are not errors, each with a kind.
#ifndef SACPLAN_PROFILER_PROFILE_NOTE_H_
#define SACPLAN_PROFILER_PROFILE_NOTE_H_

#include <string>

namespace sacplan {

// What a profiler note is about: callers and tests act on the kind, never
// on the wording of the message.
enum class ProfileNoteKind {
  // A measured fixed size differs from the graph builder's (the profile
  // keeps the graph's).
  kSizeDiffers,
  // A whole step measured faster than its parts timed alone (a loaded
  // machine can cause it): step_overhead_ms is 0.
  kStepFasterThanParts,
  // CUPTI dropped activity records; runs that lost all their kernels are
  // left out of the medians.
  kRecordsDropped,
};

// A fact worth telling the user that is not an error.
struct ProfileNote {
  ProfileNoteKind kind;
  std::string message;  // one line, for the user
};

}  // namespace sacplan

#endif  // SACPLAN_PROFILER_PROFILE_NOTE_H_
