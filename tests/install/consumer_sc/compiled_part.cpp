// The compiled part of rlflow, built in this program (an installed rlflow ships it as a header).
#include <rlflow/impl/src.hpp>
